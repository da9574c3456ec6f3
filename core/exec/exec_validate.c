/* Semantic validation of execution requests (see exec_validate.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/errors.h"
#include <eai/isolation.h>

#include "exec/exec_validate.h"
#include "obs/callback.h"
#include "base/util.h"

__attribute__((format(printf, 3, 4)))
static void add_detail(json_t *details, const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    eai_utf8_scrub(msg);   /* "%.128s" may have split a character */
    json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message", msg));
}

/* Fail with code and the collected details (stolen). */
static int refuse(struct eai_error **err, enum eai_code code, json_t *details)
{
    struct eai_error *e = eai_error_new(code, 0, "execution refused: %s", eai_code_name(code));
    if (!e) {
        json_decref(details);
        if (err)
            *err = NULL;
        return -1;
    }
    e->details = details;
    if (err)
        *err = e;
    else
        eai_error_free(e);
    return -1;
}

int eai_exec_tmp_path_ok(const char *p, size_t len, int allow_root)
{
    if (!p || len == 0 || len > EAI_EXEC_MAX_PATH_BYTES || strlen(p) != len)
        return 0;
    if (strncmp(p, "/tmp", 4) != 0)
        return 0;
    if (p[4] == '\0')
        return allow_root;
    if (p[4] != '/')
        return 0;
    /* segments after "/tmp/" */
    const char *s = p + 5;
    if (*s == '\0')
        return allow_root; /* "/tmp/" is /tmp itself */
    for (;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0)
            return 0; /* "//" or a trailing '/' */
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!e)
            break;
        s = e + 1;
    }
    return 1;
}

size_t eai_exec_path_max_segment(const char *p)
{
    size_t best = 0;
    while (p && *p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > best)
            best = n;
        if (!e)
            break;
        p = e + 1;
    }
    return best;
}

/* The stricter of two limits where 0 means none. */
static int64_t stricter(int64_t a, int64_t b)
{
    return a <= 0 ? b : b <= 0 ? a : a < b ? a : b;
}

/* [-._a-zA-Z][-._a-zA-Z0-9]* (EAI_ISO_LIMIT_ENV_NAMES_PORTABLE). */
static int env_name_portable(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || *s == '.'))
            return 0;
    return 1;
}

/* One path (a file's or a collect entry) against the limits. */
static void path_limits(json_t *d, const char *ptr, const json_t *v, int64_t max_path, int64_t max_name)
{
    size_t len = json_string_length(v), seg = eai_exec_path_max_segment(json_string_value(v));
    if (max_path > 0 && (int64_t)len > max_path)
        add_detail(d, ptr, "is %zu bytes long; the backend of this profile accepts at most %lld", len,
                   (long long)max_path);
    else if (max_name > 0 && (int64_t)seg > max_name)
        add_detail(d, ptr, "has a %zu-byte segment; the backend of this profile accepts at most %lld bytes a segment",
                   seg, (long long)max_name);
}

void eai_exec_schema_filter(const json_t *body, json_t *errors)
{
    if (!json_is_array(errors) || !json_is_string(json_object_get(body, "tool")))
        return;
    for (size_t i = json_array_size(errors); i-- > 0;) {
        const json_t *e = json_array_get(errors, i);
        const char *path = eai_jstr(e, "path");
        const char *msg = eai_jstr(e, "message");
        if (path && msg && strcmp(msg, "is required") == 0 &&
            (strcmp(path, "/image") == 0 || strcmp(path, "/command") == 0))
            json_array_remove(errors, i);
    }
}

/* ---------------------------------------------------------------- quantities */

/* CPU: quantity string or number of cores.  0 ok, -1 malformed. */
static int cpu_value(const json_t *v, int64_t *out)
{
    if (json_is_string(v))
        return eai_parse_cpu_millis(json_string_value(v), out);
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0 || n > INT64_MAX / 1000)
            return -1;
        *out = (int64_t)n * 1000;
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= 0) || d > 1e12)
            return -1;
        double m = d * 1000.0;
        double r = nearbyint(m);
        if (fabs(m - r) > 1e-6)
            return -1; /* finer than a millicore */
        *out = (int64_t)r;
        return 0;
    }
    return -1;
}

/* A non-negative whole number: a JSON integer, or a number with no
 * fraction (`30.0`), which the schema also counts as an integer. */
static int int_value(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 0)
            return -1;
        *out = (int64_t)n;
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= 0) || d > 9007199254740992.0 || d != nearbyint(d))
            return -1;
        *out = (int64_t)d;
        return 0;
    }
    return -1;
}

/* Bytes: quantity string or whole number. */
static int bytes_value(const json_t *v, int64_t *out)
{
    if (json_is_string(v))
        return eai_parse_bytes(json_string_value(v), out);
    return int_value(v, out);
}

enum lim { L_CPU, L_MEMORY, L_TIMEOUT, L_PIDS, L_OUTPUT, L_DISK, L_MAX };
static const char *const lim_names[L_MAX] = {"cpu", "memory", "timeout_s", "pids", "output_bytes", "disk"};

static void fmt_lim(enum lim l, int64_t v, char *buf, size_t len)
{
    if (l == L_CPU)
        eai_format_cpu(v, buf, len);
    else if (l == L_MEMORY || l == L_DISK)
        eai_format_bytes(v, buf, len);
    else
        snprintf(buf, len, "%lld", (long long)v);
}

int eai_exec_limits_parse(const json_t *limits, struct eai_exec_limits *o)
{
    if (!json_is_object(limits))
        return -1;
    struct eai_exec_limits r;
    memset(&r, 0, sizeof r);
    if (cpu_value(json_object_get(limits, "cpu"), &r.cpu_millis) < 0 ||
        bytes_value(json_object_get(limits, "memory"), &r.memory_bytes) < 0 ||
        int_value(json_object_get(limits, "timeout_s"), &r.timeout_s) < 0 ||
        int_value(json_object_get(limits, "pids"), &r.pids) < 0 ||
        int_value(json_object_get(limits, "output_bytes"), &r.output_bytes) < 0 ||
        bytes_value(json_object_get(limits, "disk"), &r.disk_bytes) < 0)
        return -1;
    *o = r;
    return 0;
}

int eai_exec_request_hash(const json_t *body, char out[65])
{
    char *s = json_dumps(body, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        return -1;
    eai_sha256_hex(s, strlen(s), out);
    free(s);
    return 0;
}

/* ---------------------------------------------------------------- egress */

/* host:port against one allow-list entry: exact (host case-insensitive),
 * or "*.domain:port" for any sub-domain of domain on that port. */
static int egress_match(const char *want, const char *allow)
{
    const char *wc = strrchr(want, ':'), *ac = strrchr(allow, ':');
    if (!wc || !ac || strcmp(wc, ac) != 0)
        return 0;
    size_t wl = (size_t)(wc - want), al = (size_t)(ac - allow);
    if (al == wl && strncasecmp(want, allow, wl) == 0)
        return 1;
    if (al > 2 && allow[0] == '*' && allow[1] == '.') {
        size_t dl = al - 1; /* ".domain" */
        return wl > dl && strncasecmp(want + wl - dl, allow + 1, dl) == 0;
    }
    return 0;
}

static int egress_allowed(const struct eai_profile *p, const char *want)
{
    for (char **a = p->egress_allow; a && *a; a++)
        if (egress_match(want, *a))
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- validate */

static const struct eai_profile *find_profile(const struct eai_profile *ps, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (ps[i].name && strcmp(ps[i].name, name) == 0)
            return &ps[i];
    return NULL;
}

/* A string without embedded NUL. */
static int clean_string(const json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

int eai_exec_validate(const json_t *body, const json_t *tool_doc,
                      const struct eai_profile *profiles, int nprofiles,
                      const struct eai_exec_vopts *opts, json_t **out,
                      const struct eai_profile **profile_out, struct eai_error **err)
{
    char path[64];
    json_t *d = json_array();
    json_t *rec = NULL, *env = NULL, *files_in = NULL, *collect = NULL, *egress = NULL;
    json_t *own_cmd = NULL; /* the image's own command, when none is given */
    if (!d)
        goto oom;
    if (!json_is_object(body)) {
        add_detail(d, "", "must be an object");
        return refuse(err, EAI_E_VALIDATION_FAILED, d);
    }

    /* --- tool */
    const char *tool = eai_jstr(body, "tool");
    const json_t *spec = NULL;
    if (json_object_get(body, "tool") && !tool)
        add_detail(d, "/tool", "must be a string");
    if (tool) {
        if (!tool_doc) {
            add_detail(d, "/tool", "unknown tool '%.128s'", tool);
            return refuse(err, EAI_E_VALIDATION_FAILED, d);
        }
        spec = json_object_get(tool_doc, "spec");
        if (!json_is_object(spec))
            spec = tool_doc;
    }

    /* --- profile, image, command */
    const char *pname = eai_jstr(body, "profile");
    const char *tprof = spec ? eai_jstr(spec, "sandbox_profile") : NULL;
    if (pname && tprof && strcmp(pname, tprof) != 0)
        add_detail(d, "/profile", "tool '%.128s' runs with profile '%.64s'", tool, tprof);
    if (!pname)
        pname = tprof;
    if (!pname)
        add_detail(d, "/profile", "is required");

    const json_t *image = json_object_get(body, "image");
    if (!image && spec)
        image = json_object_get(spec, "image");
    if (!image)
        add_detail(d, "/image", "is required");
    else if (!clean_string(image) || json_string_length(image) == 0)
        add_detail(d, "/image", "must be a non-empty string");

    const json_t *command = json_object_get(body, "command");
    if (!command && spec)
        command = json_object_get(spec, "command");
    if (!command) {
        if (!opts || !opts->image_command)
            add_detail(d, "/command", "is required");
        /* else asked of the image below, once the profile is known */
    } else if (!json_is_array(command) || json_array_size(command) < 1 ||
               json_array_size(command) > 256) {
        add_detail(d, "/command", "must be an array of 1 to 256 strings");
    } else {
        size_t i, total = 0;
        const json_t *a;
        json_array_foreach(command, i, a) {
            snprintf(path, sizeof path, "/command/%zu", i);
            if (!clean_string(a))
                add_detail(d, path, "must be a string without NUL characters");
            else
                total += json_string_length(a) + 1;
        }
        if (json_string_length(json_array_get(command, 0)) == 0)
            add_detail(d, "/command/0", "must not be empty");
        if (total > EAI_EXEC_MAX_ARGV_BYTES)
            add_detail(d, "/command", "is larger than %d bytes", EAI_EXEC_MAX_ARGV_BYTES);
    }

    /* --- env: the tool's, then the request's on top */
    env = json_object();
    if (!env)
        goto oom;
    const json_t *envs[2] = {spec ? json_object_get(spec, "env") : NULL, json_object_get(body, "env")};
    size_t env_bytes = 0;
    for (int k = 0; k < 2; k++) {
        const char *name;
        const json_t *v;
        if (!envs[k])
            continue;
        if (!json_is_object(envs[k])) {
            add_detail(d, "/env", "must be an object of strings");
            continue;
        }
        json_object_foreach((json_t *)envs[k], name, v) {
            snprintf(path, sizeof path, "/env/%.40s", name);
            if (!clean_string(v) || !*name || strchr(name, '=')) {
                add_detail(d, path, "must be a string without NUL characters");
                continue;
            }
            env_bytes += strlen(name) + json_string_length(v) + 2;
            json_object_set(env, name, (json_t *)v);
        }
    }
    if (env_bytes > EAI_EXEC_MAX_ENV_BYTES)
        add_detail(d, "/env", "is larger than %d bytes", EAI_EXEC_MAX_ENV_BYTES);

    /* --- stdin */
    const json_t *stdin_v = json_object_get(body, "stdin");
    if (stdin_v && !json_is_string(stdin_v))
        add_detail(d, "/stdin", "must be a string");
    const json_t *mode_v = json_object_get(body, "stdin_mode");
    int stdin_stream = 0;
    if (mode_v && (!json_is_string(mode_v) || (strcmp(json_string_value(mode_v), "stream") != 0 &&
                                               strcmp(json_string_value(mode_v), "data") != 0)))
        add_detail(d, "/stdin_mode", "must be \"data\" or \"stream\"");
    else if (mode_v && strcmp(json_string_value(mode_v), "stream") == 0) {
        stdin_stream = 1;
        if (stdin_v)
            add_detail(d, "/stdin", "must be absent with stdin_mode \"stream\" (send it with POST .../stdin)");
    }

    /* --- files */
    files_in = json_array();
    if (!files_in)
        goto oom;
    int64_t files_total = 0;
    const json_t *files = json_object_get(body, "files");
    if (files && !json_is_array(files)) {
        add_detail(d, "/files", "must be an array");
    } else if (files) {
        size_t i;
        const json_t *f;
        json_array_foreach(files, i, f) {
            const json_t *fp = json_object_get(f, "path");
            const json_t *c = json_object_get(f, "content");
            const json_t *c64 = json_object_get(f, "content_b64");
            snprintf(path, sizeof path, "/files/%zu/path", i);
            if (!json_is_string(fp) ||
                !eai_exec_tmp_path_ok(json_string_value(fp), json_string_length(fp), 0)) {
                add_detail(d, path, "must be a file path under /tmp/ without '.' or '..' segments");
                continue;
            }
            for (size_t j = 0; j < i; j++)
                if (json_equal(json_object_get(json_array_get(files, j), "path"), (json_t *)fp)) {
                    add_detail(d, path, "duplicates /files/%zu/path", j);
                    break;
                }
            snprintf(path, sizeof path, "/files/%zu", i);
            if ((c != NULL) == (c64 != NULL)) {
                add_detail(d, path, "must have exactly one of content and content_b64");
                continue;
            }
            char *b64 = NULL;
            if (c) {
                if (!json_is_string(c)) {
                    add_detail(d, path, "content must be a string");
                    continue;
                }
                files_total += (int64_t)json_string_length(c);
                b64 = eai_b64_encode(json_string_value(c), json_string_length(c));
            } else {
                size_t n = 0;
                unsigned char *raw = json_is_string(c64)
                    ? eai_b64_decode(json_string_value(c64), &n) : NULL;
                if (!raw) {
                    snprintf(path, sizeof path, "/files/%zu/content_b64", i);
                    add_detail(d, path, "is not valid base64");
                    continue;
                }
                free(raw);
                files_total += (int64_t)n;
                b64 = strdup(json_string_value(c64));
            }
            if (!b64)
                goto oom;
            json_t *o = json_pack("{s:O, s:s}", "path", fp, "content_b64", b64);
            free(b64);
            if (!o || json_array_append_new(files_in, o) < 0)
                goto oom;
        }
    }

    /* --- collect */
    collect = json_array();
    if (!collect)
        goto oom;
    const json_t *col = json_object_get(body, "collect");
    if (col && !json_is_array(col)) {
        add_detail(d, "/collect", "must be an array");
    } else if (col) {
        size_t i;
        const json_t *c;
        json_array_foreach(col, i, c) {
            snprintf(path, sizeof path, "/collect/%zu", i);
            if (!json_is_string(c) ||
                !eai_exec_tmp_path_ok(json_string_value(c), json_string_length(c), 1))
                add_detail(d, path, "must be a path under /tmp without '.' or '..' segments");
            else
                json_array_append(collect, (json_t *)c);
        }
    } else {
        json_array_append_new(collect, json_string("/tmp/outputs"));
    }

    /* --- limits: parse every given value exactly */
    const json_t *blim = json_object_get(body, "limits");
    const json_t *tlim = spec ? json_object_get(spec, "limits") : NULL;
    if (blim && !json_is_object(blim))
        add_detail(d, "/limits", "must be an object");
    int64_t val[L_MAX];
    int given[L_MAX];
    for (int l = 0; l < L_MAX; l++) {
        const json_t *v = json_object_get(blim, lim_names[l]);
        if (!v)
            v = json_object_get(tlim, lim_names[l]);
        given[l] = v != NULL;
        val[l] = 0;
        if (!v)
            continue;
        snprintf(path, sizeof path, "/limits/%s", lim_names[l]);
        int rc;
        if (l == L_CPU)
            rc = cpu_value(v, &val[l]);
        else if (l == L_MEMORY || l == L_DISK)
            rc = bytes_value(v, &val[l]);
        else
            rc = int_value(v, &val[l]);
        if (rc < 0) {
            add_detail(d, path, l == L_CPU ? "is not a CPU quantity (e.g. \"500m\", \"1\", \"1.5\")"
                              : (l == L_MEMORY || l == L_DISK)
                                  ? "is not a byte quantity (e.g. \"256Mi\", \"1Gi\", 1048576)"
                                  : "must be a positive integer");
            given[l] = 0;
        } else if (val[l] <= 0) {
            add_detail(d, path, "must be greater than zero");
            given[l] = 0;
        }
    }
    for (const char *const *k = (const char *const[]){"project_id", "agent_id", "run_id", NULL}; *k; k++) {
        const json_t *v = json_object_get(body, *k);
        snprintf(path, sizeof path, "/%s", *k);
        if (v && !clean_string(v))
            add_detail(d, path, "must be a string");
    }

    /* --- completion callback (the body's, else the tool's) */
    const json_t *cb = json_object_get(body, "callback");
    const char *cb_who = "";
    if (!cb && spec && (cb = json_object_get(spec, "callback")))
        cb_who = "the tool manifest's ";
    if (cb) {
        const json_t *u = json_object_get(cb, "url"), *sec = json_object_get(cb, "secret");
        char why[256];
        if (!json_is_object(cb) || !clean_string(u) || !clean_string(sec))
            add_detail(d, "/callback", "%smust be an object with a url and a secret (strings)", cb_who);
        else if (json_string_length(sec) < 16)
            add_detail(d, "/callback/secret", "%smust be at least 16 characters long", cb_who);
        else if (eai_cb_url_check(opts ? opts->callbacks : NULL, json_string_value(u), why, sizeof why) < 0)
            add_detail(d, "/callback/url", "%s%s", cb_who, why);
    }
    enum eai_code code = EAI_E_VALIDATION_FAILED;
    if (json_array_size(d) > 0)
        goto refused;

    /* --- profile */
    const struct eai_profile *prof = find_profile(profiles, nprofiles, pname);
    if (!prof) {
        add_detail(d, "/profile", "unknown profile '%.64s'", pname);
        code = EAI_E_UNKNOWN_PROFILE;
        goto refused;
    }

    /* --- limits against the profile's maxima (never clamped) */
    const int64_t defs[L_MAX] = {prof->def_cpu_millis, prof->def_memory, prof->def_timeout_s,
                                 prof->def_pids, prof->def_output_bytes, prof->def_disk};
    const int64_t maxs[L_MAX] = {prof->max_cpu_millis, prof->max_memory, prof->max_timeout_s,
                                 prof->max_pids, prof->max_output_bytes, prof->max_disk};
    for (int l = 0; l < L_MAX; l++) {
        if (!given[l]) {
            val[l] = defs[l];
            continue;
        }
        if (maxs[l] > 0 && val[l] > maxs[l]) {
            char a[32], b[32];
            fmt_lim((enum lim)l, val[l], a, sizeof a);
            fmt_lim((enum lim)l, maxs[l], b, sizeof b);
            snprintf(path, sizeof path, "/limits/%s", lim_names[l]);
            add_detail(d, path, "%s exceeds the maximum %s of profile '%.64s'", a, b, prof->name);
        }
    }
    if (opts && opts->files_max_total_bytes > 0 && files_total > opts->files_max_total_bytes)
        add_detail(d, "/files", "total size %lld bytes exceeds the cap of %lld bytes",
                   (long long)files_total, (long long)opts->files_max_total_bytes);
    code = EAI_E_LIMIT_EXCEEDED;
    if (json_array_size(d) > 0)
        goto refused;

    /* --- the backend's own limits: refuse here what start() would refuse */
    struct eai_exec_blimits bl;
    memset(&bl, 0, sizeof bl);
    if (opts && opts->backend_limits)
        opts->backend_limits(opts->image_arg, prof, &bl);
    int64_t max_path = stricter(EAI_EXEC_MAX_PATH_BYTES, bl.max_path_bytes);
    int64_t max_name = stricter(EAI_EXEC_MAX_NAME_BYTES, bl.max_name_bytes);
    if (files) {
        size_t i;
        const json_t *f;
        json_array_foreach(files, i, f) {
            snprintf(path, sizeof path, "/files/%zu/path", i);
            path_limits(d, path, json_object_get(f, "path"), max_path, max_name);
        }
        if (bl.max_files > 0 && (int64_t)json_array_size(files) > bl.max_files)
            add_detail(d, "/files", "has %zu files; the backend of this profile accepts at most %lld",
                       json_array_size(files), (long long)bl.max_files);
    }
    if (col) {
        size_t i;
        const json_t *c;
        json_array_foreach(col, i, c) {
            snprintf(path, sizeof path, "/collect/%zu", i);
            path_limits(d, path, c, max_path, max_name);
        }
    }
    {
        const char *name;
        const json_t *v;
        json_object_foreach(env, name, v) {
            snprintf(path, sizeof path, "/env/%.40s", name);
            size_t n = strlen(name);
            if (bl.max_env_name_bytes > 0 && (int64_t)n > bl.max_env_name_bytes)
                add_detail(d, path, "name is %zu bytes long; the backend of this profile accepts at most %lld", n,
                           (long long)bl.max_env_name_bytes);
            else if ((bl.flags & EAI_ISO_LIMIT_ENV_NAMES_PORTABLE) && !env_name_portable(name))
                add_detail(d, path, "name must start with a letter, '-', '.' or '_' and hold only letters, digits, "
                                    "'-', '.' and '_' for the backend of this profile");
        }
    }
    code = EAI_E_VALIDATION_FAILED;
    if (json_array_size(d) > 0)
        goto refused;
    if (bl.max_input_bytes > 0) {
        /* what the backend carries in one object: stdin, files, env values */
        int64_t in = files_total + (json_is_string(stdin_v) ? (int64_t)json_string_length(stdin_v) : 0);
        const char *name;
        const json_t *v;
        json_object_foreach(env, name, v)
            in += (int64_t)json_string_length(v);
        if (in > bl.max_input_bytes)
            add_detail(d, "", "stdin, files and env values total %lld bytes; the backend of this profile "
                       "accepts at most %lld", (long long)in, (long long)bl.max_input_bytes);
    }
    code = EAI_E_LIMIT_EXCEEDED;
    if (json_array_size(d) > 0)
        goto refused;

    /* --- egress: a subset of the profile's allow list */
    egress = json_array();
    if (!egress)
        goto oom;
    const json_t *net = json_object_get(body, "network");
    const json_t *eg = net ? json_object_get(net, "egress") : (spec ? json_object_get(spec, "egress") : NULL);
    if (eg) {
        size_t i;
        const json_t *e;
        json_array_foreach(eg, i, e) {
            snprintf(path, sizeof path, "/network/egress/%zu", i);
            if (!clean_string(e) || !egress_allowed(prof, json_string_value(e)))
                add_detail(d, path, "'%.200s' is not in the allow list of profile '%.64s'",
                           json_is_string(e) ? json_string_value(e) : "?", prof->name);
            else
                json_array_append(egress, (json_t *)e);
        }
    }
    code = EAI_E_EGRESS_NOT_ALLOWED;
    if (json_array_size(d) > 0)
        goto refused;
    /* streamed stdin needs the backend's stdin_write (ABI 1.4) */
    if (stdin_stream && bl.stdin_stream_unsupported) {
        add_detail(d, "/stdin_mode", "the backend of profile '%.64s' cannot stream stdin to a running program",
                   prof->name);
        code = EAI_E_VALIDATION_FAILED;
        goto refused;
    }
    /* granted, but never silently dropped: the backend must carry it */
    if (json_array_size(egress) > 0 && bl.egress_unsupported) {
        add_detail(d, "/network/egress", "the backend of profile '%.64s' cannot enforce network egress",
                   prof->name);
        code = EAI_E_EGRESS_UNSUPPORTED;
        goto refused;
    }

    /* --- image */
    if (opts && opts->image_known && !opts->image_known(opts->image_arg, prof, json_string_value(image))) {
        add_detail(d, "/image", "unknown image '%.200s'", json_string_value(image));
        code = EAI_E_UNKNOWN_IMAGE;
        goto refused;
    }

    /* --- no command: the image's own (Entrypoint + Cmd), as Docker and Kubernetes run it */
    if (!command) {
        char why[300] = "";
        if (opts->image_command(opts->image_arg, prof, json_string_value(image), &own_cmd, why, sizeof why) < 0 ||
            !own_cmd) {
            add_detail(d, "/command", "is required: %s", why[0] ? why : "the image has no command of its own");
            code = EAI_E_VALIDATION_FAILED;
            goto refused;
        }
        command = own_cmd;
    }

    /* --- the record */
    char q[L_MAX][32];
    fmt_lim(L_CPU, val[L_CPU], q[L_CPU], sizeof q[0]);
    fmt_lim(L_MEMORY, val[L_MEMORY], q[L_MEMORY], sizeof q[0]);
    fmt_lim(L_DISK, val[L_DISK], q[L_DISK], sizeof q[0]);
    json_t *stdin_j = json_null();
    int stdin_b64 = 0;
    if (json_is_string(stdin_v)) {
        if (clean_string(stdin_v)) {
            stdin_j = json_string_nocheck(json_string_value(stdin_v));
        } else {
            char *b = eai_b64_encode(json_string_value(stdin_v), json_string_length(stdin_v));
            stdin_j = b ? json_string(b) : NULL;
            free(b);
            stdin_b64 = 1;
        }
        if (!stdin_j)
            goto oom;
    }
    rec = json_pack("{s:s, s:s, s:O, s:O, s:{s:s, s:s, s:I, s:I, s:I, s:s}, s:o, s:o, s:b, s:o, s:o, s:o,"
                    " s:O?, s:O?, s:O?, s:O?}",
                    "profile", prof->name, "backend", prof->backend ? prof->backend : "",
                    "image", image, "command", command,
                    "limits", "cpu", q[L_CPU], "memory", q[L_MEMORY],
                    "timeout_s", (json_int_t)val[L_TIMEOUT], "pids", (json_int_t)val[L_PIDS],
                    "output_bytes", (json_int_t)val[L_OUTPUT], "disk", q[L_DISK],
                    "env", env, "stdin", stdin_j, "stdin_b64", stdin_b64,
                    "files_in", files_in, "collect", collect, "egress", egress,
                    "tool", json_object_get(body, "tool"),
                    "project_id", json_object_get(body, "project_id"),
                    "agent_id", json_object_get(body, "agent_id"),
                    "run_id", json_object_get(body, "run_id"));
    env = files_in = collect = egress = NULL; /* stolen by json_pack even on failure */
    json_decref(own_cmd);
    own_cmd = NULL;
    if (!rec)
        goto oom;
    for (const char *const *k = (const char *const[]){"tool", "project_id", "agent_id", "run_id", NULL}; *k; k++)
        if (!json_object_get(rec, *k))
            json_object_set_new(rec, *k, json_null());
    if (stdin_stream)
        json_object_set_new(rec, "stdin_mode", json_string("stream"));
    if (cb)
        json_object_set_new(rec, "callback", json_pack("{s:O, s:O}", "url", json_object_get(cb, "url"),
                                                       "secret", json_object_get(cb, "secret")));
    json_decref(d);
    *out = rec;
    if (profile_out)
        *profile_out = prof;
    return 0;

refused:
    json_decref(own_cmd);
    json_decref(env);
    json_decref(files_in);
    json_decref(collect);
    json_decref(egress);
    return refuse(err, code, d);
oom:
    json_decref(own_cmd);
    json_decref(env);
    json_decref(files_in);
    json_decref(collect);
    json_decref(egress);
    json_decref(d);
    return eai_error_set(err, EAI_E_INTERNAL, "out of memory validating an execution");
}
