/* dlopen at first use (dynlib.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base/dynlib.h"

static __thread struct eai_dynlib *opening;

static void open_once(void)
{
    struct eai_dynlib *lib = opening;
    void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(lib->err, sizeof(lib->err), "%s", e ? e : lib->soname);
        return;
    }
    for (size_t i = 0; i < lib->n; i++) {
        dlerror();
        void *f = dlsym(h, lib->names[i]);
        if (!f) {
            snprintf(lib->err, sizeof(lib->err), "%s: no symbol %s", lib->soname, lib->names[i]);
            memset(lib->fns, 0, lib->n * sizeof(void *));
            dlclose(h);
            return;
        }
        /* POSIX: a data pointer from dlsym converts to a function pointer */
        memcpy(&lib->fns[i], &f, sizeof(f));
    }
    lib->ok = 1;
}

int eai_dynlib_open(struct eai_dynlib *lib)
{
    opening = lib;
    pthread_once(&lib->once, open_once);
    opening = NULL;
    return lib->ok ? 0 : -1;
}
