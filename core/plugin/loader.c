#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <eai/isolation.h>
#include <eai/sinks.h>
#include <eai/storage.h>

#include "base/errors.h"
#include "plugin/loader.h"

static const char *const eai_kind_names[EAI_KIND_MAX] = {"isolation", "storage", "audit", "finops", "telemetry"};

/* Smallest ops table each kind must have at ABI 1.0. */
static const size_t eai_ops_min_size[EAI_KIND_MAX] = {
    sizeof(struct eai_isolation_ops), sizeof(struct eai_storage_ops),
    sizeof(struct eai_audit_ops), sizeof(struct eai_finops_ops), sizeof(struct eai_telemetry_ops),
};

#define EAI_BUILTINS_MAX 16
static eai_plugin_descriptor_fn eai_builtins[EAI_BUILTINS_MAX];
static int eai_nbuiltins;

const char *eai_kind_name(enum eai_plugin_kind kind)
{
    return ((int)kind >= 0 && kind < EAI_KIND_MAX) ? eai_kind_names[kind] : "unknown";
}

const char *eai_plugin_dir(void)
{
    static char dir[PATH_MAX];
    const char *env = getenv("EAI_PLUGIN_DIR");
    if (env && *env)
        return env;
    if (dir[0])
        return dir;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return "plugins";
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(dir, sizeof(dir), "%s/plugins", exe);
    return dir;
}

int eai_plugin_register_builtin(eai_plugin_descriptor_fn fn)
{
    for (int i = 0; i < eai_nbuiltins; i++)
        if (eai_builtins[i] == fn)
            return 0;
    if (eai_nbuiltins >= EAI_BUILTINS_MAX)
        return -1;
    eai_builtins[eai_nbuiltins++] = fn;
    return 0;
}

static int eai_name_ok(const char *name)
{
    if (!name || !*name || strlen(name) > 64)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
            return 0;
    return 1;
}

int eai_plugin_check(const struct eai_plugin_descriptor *d, enum eai_plugin_kind kind,
                     const char *name, const char *what, struct eai_error **err)
{
    if (!d) {
        return eai_error_set(err, EAI_E_INTERNAL, "plugin %s: descriptor function returned NULL", what);
    }
    if (d->abi_major != EAI_ABI_MAJOR || d->abi_minor > EAI_ABI_MINOR) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: incompatible ABI: plugin was built for ABI %u.%u, this eaid provides ABI %u.%u "
            "(major must match, minor must not be newer)",
            what, d->abi_major, d->abi_minor, EAI_ABI_MAJOR, EAI_ABI_MINOR);
    }
    if (d->struct_size < sizeof(struct eai_plugin_descriptor)) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: descriptor too short: %zu bytes, ABI %u.%u needs %zu (plugin ABI %u.%u)",
            what, d->struct_size, EAI_ABI_MAJOR, EAI_ABI_MINOR, sizeof(struct eai_plugin_descriptor),
            d->abi_major, d->abi_minor);
    }
    if (d->kind != kind || !d->name || strcmp(d->name, name) != 0) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: describes itself as %s '%s', expected %s '%s'", what,
            eai_kind_name(d->kind), d->name ? d->name : "(null)", eai_kind_name(kind), name);
    }
    if (!d->create || !d->destroy || !d->ops) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: descriptor lacks create, destroy or ops (plugin ABI %u.%u, host ABI %u.%u)",
            what, d->abi_major, d->abi_minor, EAI_ABI_MAJOR, EAI_ABI_MINOR);
    }
    size_t ops_size = *(const size_t *)d->ops;
    if (ops_size < eai_ops_min_size[kind]) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: %s ops table too short: %zu bytes, needs %zu (plugin ABI %u.%u, host ABI %u.%u)",
            what, eai_kind_name(kind), ops_size, eai_ops_min_size[kind], d->abi_major, d->abi_minor,
            EAI_ABI_MAJOR, EAI_ABI_MINOR);
    }
    return 0;
}

const struct eai_plugin_descriptor *eai_plugin_load(const char *plugin_dir, enum eai_plugin_kind kind,
                                                    const char *name, struct eai_error **err)
{
    if ((int)kind < 0 || kind >= EAI_KIND_MAX) {
        eai_error_set(err, EAI_E_INTERNAL, "unknown plugin kind %d", (int)kind);
        return NULL;
    }
    if (!eai_name_ok(name)) {
        eai_error_set(err, EAI_E_INTERNAL,
            "plugin name '%s' refused: only [a-z0-9_-], no path separators", name ? name : "(null)");
        return NULL;
    }
    for (int i = 0; i < eai_nbuiltins; i++) {
        const struct eai_plugin_descriptor *d = eai_builtins[i]();
        if (d && d->kind == kind && d->name && strcmp(d->name, name) == 0) {
            char what[96];
            snprintf(what, sizeof(what), "built-in %s '%s'", eai_kind_name(kind), name);
            return eai_plugin_check(d, kind, name, what, err) == 0 ? d : NULL;
        }
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/eai-%s-%s.so", plugin_dir, eai_kind_name(kind), name) >= (int)sizeof(path)) {
        eai_error_set(err, EAI_E_INTERNAL, "plugin path too long");
        return NULL;
    }
    struct stat st;
    if (lstat(path, &st) < 0) {
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: not a regular file (symlinks and others are refused)", path);
        return NULL;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: dlopen: %s", path, e ? e : "?");
        return NULL;
    }
    eai_plugin_descriptor_fn fn;
    *(void **)&fn = dlsym(dl, EAI_PLUGIN_DESCRIPTOR_SYMBOL);
    if (!fn) {
        eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: missing symbol %s() (host ABI %u.%u)", path, EAI_PLUGIN_DESCRIPTOR_SYMBOL,
            EAI_ABI_MAJOR, EAI_ABI_MINOR);
        dlclose(dl);
        return NULL;
    }
    const struct eai_plugin_descriptor *d = fn();
    if (eai_plugin_check(d, kind, name, path, err) < 0) {
        dlclose(dl);
        return NULL;
    }
    return d; /* never unloaded */
}
