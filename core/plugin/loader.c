#include <dlfcn.h>
#include <pthread.h>
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
#include "plugin/messages.h"

static const char *const eai_kind_names[EAI_KIND_MAX] = {"isolation", "storage", "audit", "finops", "telemetry"};

/* Ops table sizes a plugin may have: from the frozen 1.0 size (the
 * smallest any 1.x plugin has) to today's (the host-side table). */
static const size_t eai_ops_min_size[EAI_KIND_MAX] = {
    EAI_ISOLATION_OPS_SIZE_1_0, EAI_STORAGE_OPS_SIZE_1_0,
    EAI_AUDIT_OPS_SIZE_1_0, EAI_FINOPS_OPS_SIZE_1_0, EAI_TELEMETRY_OPS_SIZE_1_0,
};
static const size_t eai_ops_cur_size[EAI_KIND_MAX] = {
    sizeof(struct eai_isolation_ops), sizeof(struct eai_storage_ops),
    sizeof(struct eai_audit_ops), sizeof(struct eai_finops_ops), sizeof(struct eai_telemetry_ops),
};

/* The frozen sizes never move: include/eai/abi.lock records every
 * struct's layout per released minor and the build checks the headers
 * against it (tools/abi_lock.py), so a field inserted, moved or appended
 * without a new minor stops the build before it reaches a plugin. */

/* Host-side copy of a loaded descriptor: today's size, its ops table
 * normalised to today's size (Redis RM_CreateDataType: fields of a newer
 * version copied only when the plugin has them). */
struct eai_loaded {
    struct eai_plugin_descriptor desc;     /* returned to callers; .ops -> ops below */
    union {
        size_t size;
        struct eai_isolation_ops iso;
        struct eai_storage_ops storage;
        struct eai_audit_ops audit;
        struct eai_finops_ops finops;
        struct eai_telemetry_ops telemetry;
    } ops;
    const struct eai_plugin_descriptor *orig;
    size_t plugin_ops_size;                /* as the plugin declared it */
    struct eai_loaded *next;
};
static struct eai_loaded *eai_loaded_list;
static pthread_mutex_t eai_loaded_lock = PTHREAD_MUTEX_INITIALIZER;

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
    snprintf(dir, sizeof(dir), "%s/plugins", exe); /* the build tree */
#ifdef EAI_PLUGIN_RELDIR
    struct stat st;
    char installed[PATH_MAX];
    /* installed: <prefix>/bin/eaid and <prefix>/<libdir>/eai/plugins */
    if (stat(dir, &st) < 0 &&
        snprintf(installed, sizeof(installed), "%s/%s", exe, EAI_PLUGIN_RELDIR) < (int)sizeof(installed) &&
        stat(installed, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(dir, sizeof(dir), "%s", installed);
#endif
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

const struct eai_build_fingerprint *eai_host_fingerprint(void)
{
    static const struct eai_build_fingerprint fp = EAI_BUILD_FINGERPRINT;
    return &fp;
}

/* PostgreSQL dfmgr.c incompatible_module_error(): name what differs, with
 * the plugin's value and ours. */
static int eai_fingerprint_check(const struct eai_build_fingerprint *p, const char *what, struct eai_error **err)
{
    const struct eai_build_fingerprint *h = eai_host_fingerprint();
    if (p->size < sizeof(*p))
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: incompatible build: no build fingerprint (size %u, needs %zu); start the descriptor "
            "with EAI_PLUGIN_DESCRIPTOR_HEADER (include/eai/plugin.h)", what, p->size, sizeof(*p));
    if (p->jansson_major != h->jansson_major)
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: incompatible build: plugin was built against jansson %u.%u, eaid against jansson "
            "%u.%u (json_t crosses the ABI: rebuild the plugin against jansson %u)", what, p->jansson_major,
            p->jansson_minor, h->jansson_major, h->jansson_minor, h->jansson_major);
    if (p->libevent_major && h->libevent_major &&
        (p->libevent_major != h->libevent_major || p->libevent_minor != h->libevent_minor))
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: incompatible build: plugin was built against libevent %u.%u, eaid against libevent "
            "%u.%u (struct event_base crosses the ABI: rebuild the plugin against libevent %u.%u)", what,
            p->libevent_major, p->libevent_minor, h->libevent_major, h->libevent_minor, h->libevent_major,
            h->libevent_minor);
    static const struct { const char *what; size_t off; } sizes[] = {
        {"sizeof(void *)", offsetof(struct eai_build_fingerprint, pointer_size)},
        {"sizeof(size_t)", offsetof(struct eai_build_fingerprint, size_t_size)},
        {"sizeof(json_int_t)", offsetof(struct eai_build_fingerprint, json_int_size)},
        {"sizeof(enum eai_code)", offsetof(struct eai_build_fingerprint, enum_size)},
    };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint32_t pv = *(const uint32_t *)((const char *)p + sizes[i].off);
        uint32_t hv = *(const uint32_t *)((const char *)h + sizes[i].off);
        if (pv != hv)
            return eai_error_set(err, EAI_E_INTERNAL,
                "plugin %s: incompatible build: plugin has %s = %u, eaid has %s = %u", what, sizes[i].what,
                pv, sizes[i].what, hv);
    }
    return 0;
}

int eai_plugin_check(const struct eai_plugin_descriptor *d, enum eai_plugin_kind kind,
                     const char *name, const char *what, struct eai_error **err)
{
    if (!d) {
        return eai_error_set(err, EAI_E_INTERNAL, "plugin %s: descriptor function returned NULL", what);
    }
    if (d->abi_major != EAI_ABI_MAJOR || d->abi_minor > EAI_ABI_MINOR) {
        if (d->abi_major == EAI_ABI_MAJOR)
            return eai_error_set(err, EAI_E_INTERNAL,
                "plugin %s: incompatible ABI: plugin was built for ABI %u.%u, this eaid provides ABI %u.%u "
                "(a plugin built against newer headers may use what this eaid lacks: rebuild it against "
                "the headers of ABI %u.%u or older, or upgrade eaid)",
                what, d->abi_major, d->abi_minor, EAI_ABI_MAJOR, EAI_ABI_MINOR, EAI_ABI_MAJOR, EAI_ABI_MINOR);
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: incompatible ABI: plugin was built for ABI %u.%u, this eaid provides ABI %u.%u "
            "(major must match, minor must not be newer)",
            what, d->abi_major, d->abi_minor, EAI_ABI_MAJOR, EAI_ABI_MINOR);
    }
    if (d->struct_size < EAI_PLUGIN_DESCRIPTOR_SIZE_1_0) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: descriptor too short: %zu bytes, ABI %u.0 needs at least %zu (plugin ABI %u.%u, "
            "host ABI %u.%u)",
            what, d->struct_size, EAI_ABI_MAJOR, (size_t)EAI_PLUGIN_DESCRIPTOR_SIZE_1_0,
            d->abi_major, d->abi_minor, EAI_ABI_MAJOR, EAI_ABI_MINOR);
    }
    if (d->struct_size > sizeof(struct eai_plugin_descriptor)) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: descriptor too long: %zu bytes, ABI %u.%u knows %zu (plugin ABI %u.%u): built "
            "against newer headers than it declares?",
            what, d->struct_size, EAI_ABI_MAJOR, EAI_ABI_MINOR, sizeof(struct eai_plugin_descriptor),
            d->abi_major, d->abi_minor);
    }
    if (d->abi_minor >= 1 && d->struct_size < EAI_PLUGIN_DESCRIPTOR_SIZE_1_1) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: descriptor of %zu bytes for ABI %u.%u, which needs %zu (the build fingerprint)",
            what, d->struct_size, d->abi_major, d->abi_minor, (size_t)EAI_PLUGIN_DESCRIPTOR_SIZE_1_1);
    }
    if (d->struct_size >= EAI_PLUGIN_DESCRIPTOR_SIZE_1_1 && eai_fingerprint_check(&d->build, what, err) < 0)
        return -1;
    if (d->kind != kind || !d->name || strcmp(d->name, name) != 0) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: describes itself as %s '%s', expected %s '%s'", what,
            eai_kind_name(d->kind), d->name ? d->name : "(null)", eai_kind_name(kind), name);
    }
    if (d->abi_minor >= 4 && d->struct_size < EAI_PLUGIN_DESCRIPTOR_SIZE_1_4) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: descriptor of %zu bytes for ABI %u.%u, which needs %zu (the message table)",
            what, d->struct_size, d->abi_major, d->abi_minor, (size_t)EAI_PLUGIN_DESCRIPTOR_SIZE_1_4);
    }
    if (d->struct_size >= EAI_PLUGIN_DESCRIPTOR_SIZE_1_4 && eai_plugin_messages_check(d->messages, what, err) < 0)
        return -1;
    if (!d->create || !d->destroy || !d->ops) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: descriptor lacks create, destroy or ops (plugin ABI %u.%u, host ABI %u.%u)",
            what, d->abi_major, d->abi_minor, EAI_ABI_MAJOR, EAI_ABI_MINOR);
    }
    size_t ops_size = *(const size_t *)d->ops;
    if (ops_size < eai_ops_min_size[kind]) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: %s ops table too short: %zu bytes, ABI %u.0 needs at least %zu (plugin ABI %u.%u, "
            "host ABI %u.%u)",
            what, eai_kind_name(kind), ops_size, EAI_ABI_MAJOR, eai_ops_min_size[kind], d->abi_major,
            d->abi_minor, EAI_ABI_MAJOR, EAI_ABI_MINOR);
    }
    if (ops_size > eai_ops_cur_size[kind]) {
        return eai_error_set(err, EAI_E_INTERNAL,
            "plugin %s: %s ops table too long: %zu bytes, ABI %u.%u knows %zu (plugin ABI %u.%u): built "
            "against newer headers than it declares?",
            what, eai_kind_name(kind), ops_size, EAI_ABI_MAJOR, EAI_ABI_MINOR, eai_ops_cur_size[kind],
            d->abi_major, d->abi_minor);
    }
    return 0;
}

/* Mandatory ops of each kind (checked on the normalised table). */
static const char *eai_missing_op(enum eai_plugin_kind kind, const struct eai_loaded *l)
{
    switch (kind) {
    case EAI_KIND_ISOLATION:
        return !l->ops.iso.probe ? "probe" : !l->ops.iso.start ? "start" : !l->ops.iso.cancel ? "cancel" : NULL;
    case EAI_KIND_STORAGE: {
        /* every 1.0 op is mandatory (core and the CLI call them as they are);
         * the 1.1 ones are optional */
        static const char *const names[] = {
            "migrate", "ping", "tenant_create", "tenant_get", "key_create", "key_get", "key_revoke",
            "exec_create", "exec_get", "exec_list", "exec_claim", "exec_renew", "exec_cancel", "exec_finish",
            "exec_stale", "exec_counts", "file_get", "manifest_put", "manifest_get", "manifest_delete",
            "audit_append", "audit_list", "outbox_fetch", "outbox_ack", "ledger_insert", "ledger_query",
            "kv_get", "kv_set",
        };
        _Static_assert(sizeof(names) / sizeof(names[0]) ==
                           (EAI_STORAGE_OPS_SIZE_1_0 - sizeof(size_t)) / sizeof(void (*)(void)),
                       "one name per 1.0 storage op");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            void (*fp)(void);
            memcpy(&fp, (const char *)&l->ops.storage + sizeof(size_t) + i * sizeof(fp), sizeof(fp));
            if (!fp)
                return names[i];
        }
        return NULL;
    }
    case EAI_KIND_AUDIT:
        return !l->ops.audit.deliver ? "deliver" : NULL;
    case EAI_KIND_FINOPS:
        return !l->ops.finops.deliver ? "deliver" : NULL;
    case EAI_KIND_TELEMETRY:
        return !l->ops.telemetry.export_spans ? "export_spans" : NULL;
    default:
        return "?";
    }
}

/* The host-side, normalised copy of a checked descriptor (one per
 * descriptor, kept for the process' life like the .so itself). */
static const struct eai_plugin_descriptor *eai_plugin_normalise(const struct eai_plugin_descriptor *d,
                                                                enum eai_plugin_kind kind, const char *what,
                                                                struct eai_error **err)
{
    pthread_mutex_lock(&eai_loaded_lock);
    for (struct eai_loaded *l = eai_loaded_list; l; l = l->next)
        if (l->orig == d) {
            pthread_mutex_unlock(&eai_loaded_lock);
            return &l->desc;
        }
    struct eai_loaded *l = calloc(1, sizeof(*l));
    if (!l) {
        pthread_mutex_unlock(&eai_loaded_lock);
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: out of memory", what);
        return NULL;
    }
    /* the descriptor: what the plugin has, zeros past its end */
    memcpy(&l->desc, d, d->struct_size);
    l->desc.struct_size = sizeof(l->desc);
    /* the ops table: what the plugin has, NULL past its end */
    l->plugin_ops_size = *(const size_t *)d->ops;
    memcpy(&l->ops, d->ops, l->plugin_ops_size);
    l->ops.size = eai_ops_cur_size[kind];
    l->desc.ops = &l->ops;
    l->orig = d;
    const char *missing = eai_missing_op(kind, l);
    if (missing) {
        pthread_mutex_unlock(&eai_loaded_lock);
        free(l);
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: mandatory %s op '%s' is NULL (plugin ABI %u.%u)", what,
                      eai_kind_name(kind), missing, d->abi_major, d->abi_minor);
        return NULL;
    }
    /* its messages, for details[].message in French (http/details_i18n.c) */
    if (d->struct_size >= EAI_PLUGIN_DESCRIPTOR_SIZE_1_4 && eai_plugin_messages_add(d->messages) < 0) {
        pthread_mutex_unlock(&eai_loaded_lock);
        free(l);
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: the plugins' messages are more than %d together", what,
                      EAI_PLUGIN_MESSAGES_MAX);
        return NULL;
    }
    l->next = eai_loaded_list;
    eai_loaded_list = l;
    pthread_mutex_unlock(&eai_loaded_lock);
    return &l->desc;
}

size_t eai_plugin_ops_size(const struct eai_plugin_descriptor *d)
{
    pthread_mutex_lock(&eai_loaded_lock);
    size_t n = d && d->ops ? *(const size_t *)d->ops : 0;
    for (struct eai_loaded *l = eai_loaded_list; l; l = l->next)
        if (&l->desc == d)
            n = l->plugin_ops_size;
    pthread_mutex_unlock(&eai_loaded_lock);
    return n;
}

int eai_plugin_exists(const char *plugin_dir, enum eai_plugin_kind kind, const char *name)
{
    if ((int)kind < 0 || kind >= EAI_KIND_MAX || !eai_name_ok(name))
        return 1; /* not "unknown": eai_plugin_load says what is wrong */
    for (int i = 0; i < eai_nbuiltins; i++) {
        const struct eai_plugin_descriptor *d = eai_builtins[i]();
        if (d && d->kind == kind && d->name && strcmp(d->name, name) == 0)
            return 1;
    }
    char path[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof(path), "%s/eai-%s-%s.so", plugin_dir, eai_kind_name(kind), name) >= (int)sizeof(path))
        return 1;
    return lstat(path, &st) == 0 || errno != ENOENT;
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
            return eai_plugin_check(d, kind, name, what, err) == 0 ? eai_plugin_normalise(d, kind, what, err)
                                                                   : NULL;
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
            "plugin %s: missing symbol %s() (host ABI %u.%u); declare it once per plugin, non-static, "
            "exported and with C linkage: `EAI_PLUGIN_DECLARE(my_descriptor)` after the descriptor, which is "
            "`EAI_PLUGIN_EXPORT const struct eai_plugin_descriptor *eai_plugin_descriptor(void) "
            "{ return &my_descriptor; }` (with -fvisibility=hidden, EAI_PLUGIN_EXPORT is what exports it; "
            "in C++ wrap it in extern \"C\"); check with `nm -D --defined-only %s`",
            path, EAI_PLUGIN_DESCRIPTOR_SYMBOL, EAI_ABI_MAJOR, EAI_ABI_MINOR, path);
        dlclose(dl);
        return NULL;
    }
    const struct eai_plugin_descriptor *d = fn();
    const struct eai_plugin_descriptor *n = NULL;
    if (eai_plugin_check(d, kind, name, path, err) < 0 || !(n = eai_plugin_normalise(d, kind, path, err))) {
        dlclose(dl);
        return NULL;
    }
    return n; /* never unloaded */
}
