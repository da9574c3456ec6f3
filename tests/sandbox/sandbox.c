/*
 * test_sandbox: the shared harness and main() of the sandbox suite
 * (sandbox.h).  The backend is argv[1] (or EAI_SANDBOX_BACKEND): the real
 * plugin loaded by the real loader into a real host on a real event loop.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <event2/event.h>

#include "base/errors.h"
#include "base/worker.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "images/images.h"
#include "sandbox.h"

const struct sb_backend *g_be;
struct event_base *g_base;
struct eai_host *g_host;
const struct eai_plugin_descriptor *g_desc;
const struct eai_isolation_ops *g_ops;
void *g_iso;
char g_rootfs[PATH_MAX];

struct iso_run *sb_run_new(const char *const *argv)
{
    struct iso_run *r = iso_run_new(argv, g_be->image, g_be->profile);
    r->job.runtime_class = !strcmp(g_be->name, "kata") ? "kata" : NULL;
    r->job.cpu_millis = 1000;
    r->job.memory_bytes = g_be->memory;
    r->job.pids = g_be->pids;
    r->job.disk_bytes = g_be->disk;
    return r;
}

void sb_loop_until(int (*cond)(void *), void *arg, double max_s)
{
    iso_loop_until(g_base, cond, arg, max_s);
}

void sb_loop(double s)
{
    iso_loop_until(g_base, NULL, NULL, s);
}

int sb_run_job_on(void *iso, struct iso_run *r, double max_s, enum eai_code *code)
{
    void *h = NULL;
    struct eai_error *err = NULL;
    r->t_start = iso_now_s();
    if (g_ops->start(iso ? iso : g_iso, &r->job, &iso_run_cb, r, &h, &err) < 0) {
        if (code)
            *code = err ? err->code : EAI_OK;
        eai_error_free(err);
        return -1;
    }
    sb_loop_until(iso_run_done, r, max_s);
    if (getenv("EAI_TEST_VERBOSE"))
        fprintf(stderr, "\n[%s] %.2fs outcome=%d exit=%d sig=%d\n--out--\n%s--err--\n%s\n", r->argv[0],
                iso_now_s() - r->t_start, r->outcome, r->exit_code, r->sig, r->out, r->err);
    return 0;
}

int sb_run_job(struct iso_run *r, double max_s)
{
    return sb_run_job_on(NULL, r, max_s, NULL);
}

int sb_count_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            n++;
    closedir(d);
    return n;
}

int sb_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

int sb_count_lines(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

int sb_sh_out(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "re");
    if (!p)
        return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int probe_settled(void *arg)
{
    struct eai_iso_probe p;
    g_ops->probe(arg, &p);
    return p.ready || !p.pending;
}

/* Instances and their host handles (eai_plugin_create), for sb_destroy. */
#define SB_INSTANCES 64
static struct {
    void *self;
    struct eai_host *handle;
} g_inst[SB_INSTANCES];

void sb_destroy(void *iso)
{
    struct eai_host *handle = NULL;
    for (int i = 0; i < SB_INSTANCES; i++)
        if (g_inst[i].self == iso && iso) {
            handle = g_inst[i].handle;
            g_inst[i].self = NULL;
            g_inst[i].handle = NULL;
            break;
        }
    eai_plugin_destroy(g_desc, iso, handle);
}

void *sb_make_instance(json_t *cfg, int sweep)
{
    struct eai_error *err = NULL;
    void *self = NULL;
    struct eai_host *handle = NULL;
    if (eai_plugin_create(g_desc, g_host, cfg, &self, &handle, &err) < 0)
        self = NULL;
    json_decref(cfg);
    for (int i = 0; self && i < SB_INSTANCES; i++)
        if (!g_inst[i].self) {
            g_inst[i].self = self;
            g_inst[i].handle = handle;
            break;
        }
    if (!self) {
        fprintf(stderr, "create: %s\n", err ? err->message : "?");
        eai_error_free(err);
        return NULL;
    }
    if (sweep && g_ops->sweep)
        g_ops->sweep(self);
    sb_loop_until(probe_settled, self, 60);
    return self;
}

int sb_host_init(const char *data_dir, const char *image_dir)
{
    g_base = event_base_new();
    if (!g_base || eai_workers_start(g_base, 2) < 0)
        return -1;
    g_host = eai_host_new(g_base, data_dir);
    if (!g_host)
        return -1;
    eai_host_set_image_dir(g_host, image_dir);
    if (eai_images_resolve(image_dir, g_be->image, g_rootfs, sizeof(g_rootfs)) < 0) {
        fprintf(stderr, "image %s not in %s\n", g_be->image, image_dir);
        return -1;
    }
    struct eai_error *err = NULL;
    g_desc = eai_plugin_load(eai_plugin_dir(), EAI_KIND_ISOLATION, g_be->name, &err);
    if (!g_desc) {
        fprintf(stderr, "load: %s\n", err ? err->message : "?");
        eai_error_free(err);
        return -1;
    }
    g_ops = g_desc->ops;
    return 0;
}

void sb_host_clean(void)
{
    if (g_base)
        sb_loop(0.2); /* reap the children destroy() killed */
    eai_workers_stop();
    if (g_host)
        eai_host_free(g_host);
    if (g_base)
        event_base_free(g_base);
    g_host = NULL;
    g_base = NULL;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : getenv("EAI_SANDBOX_BACKEND");
    static const struct sb_backend *const all[] = {&sb_gvisor, &sb_kata};
    for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
        if (!strcmp(name, all[i]->name))
            g_be = all[i];
    if (!g_be) {
        fprintf(stderr, "usage: %s gvisor|kata (or EAI_SANDBOX_BACKEND)\n", argv[0]);
        return 2;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    if (g_be->register_suites() != 0) {
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    unsigned suite_fails = CU_get_number_of_suites_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (g_be->global_clean)
        g_be->global_clean();
    return (fails || suite_fails || run == 0) ? 1 : 0;
}
