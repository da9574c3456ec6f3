/* Libraries only some paths need (libcurl for outbound HTTP, libarchive for
 * `eaid images import`), opened with dlopen at their first use instead of
 * being linked: `eaid serve` then never maps them nor what they pull in
 * (GnuTLS, Kerberos, LDAP through libcurl; ICU, libxml2, libstdc++ through
 * libarchive), about 5 MiB of resident pages (docs/performance.md "Memory").
 *
 * A user lists the functions it calls in an X-macro, declares the table with
 * EAI_DYNLIB_TABLE and maps each name to the table's entry, so its code keeps
 * calling the library's own names with the header's own types:
 *
 *   #define ZLIB_FNS(X) X(deflate) X(inflate)
 *   EAI_DYNLIB_TABLE(zlib, "libz.so.1", ZLIB_FNS);
 *   #define deflate (zlib.deflate)
 *
 * and calls eai_dynlib_open(&zlib_lib) before the first call (thread safe,
 * done once; the library stays open for the process). */
#ifndef EAI_CORE_DYNLIB_H
#define EAI_CORE_DYNLIB_H

#include <pthread.h>
#include <stddef.h>

struct eai_dynlib {
    pthread_once_t once;
    const char *soname;
    const char *const *names; /* names[i] resolves fns[i] */
    void **fns;
    size_t n;
    int ok;
    char err[256];
};

#define EAI_DYNLIB_FIELD_(f) __typeof__(&f) f;
#define EAI_DYNLIB_NAME_(f) #f,
/* static struct { ... } VAR (one pointer per function, the header's type),
 * its names and the struct eai_dynlib VAR##_lib describing it. */
#define EAI_DYNLIB_TABLE(var, so, FNS)                                                                               \
    static struct {                                                                                                \
        FNS(EAI_DYNLIB_FIELD_)                                                                                     \
    } var;                                                                                                         \
    static const char *const var##_names[] = {FNS(EAI_DYNLIB_NAME_)};                                              \
    static struct eai_dynlib var##_lib = {PTHREAD_ONCE_INIT,                                                       \
                                          so,                                                                      \
                                          var##_names,                                                             \
                                          (void **)&var,                                                           \
                                          sizeof(var##_names) / sizeof(var##_names[0]),                            \
                                          0,                                                                       \
                                          {0}}

/* Open soname once and resolve every name; 0, or -1 (then lib->err says
 * why, and every later call returns -1 again without retrying). */
int eai_dynlib_open(struct eai_dynlib *lib);

#endif
