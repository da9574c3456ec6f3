/* eaid: entry point (serve and the admin CLI).  Filled in by the core HTTP work. */
#include <stdio.h>

int main(int argc, char **argv)
{
    fprintf(stderr, "usage: eaid serve|tenants|keys|migrate|images|audit ...\n");
    return 2;
}
