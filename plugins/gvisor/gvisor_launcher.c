/*
 * The launcher of pooled sandboxes (launcher/eai_launcher.c, docs/gvisor.md
 * "The launcher"): its bytes, embedded in the plugin at build time; its
 * installation into the work dir; and the launch file of one execution.
 * Everything here runs on worker threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "gvisor.h"

/* The static launcher built by launcher/CMakeLists.txt, as read-only data of
 * this plugin (GV_LAUNCHER_ELF: its path, set by CMake). */
__asm__(".section .rodata\n"
        ".balign 16\n"
        ".globl gv_launcher_elf\n"
        ".hidden gv_launcher_elf\n"
        "gv_launcher_elf:\n"
        ".incbin \"" GV_LAUNCHER_ELF "\"\n"
        ".globl gv_launcher_elf_end\n"
        ".hidden gv_launcher_elf_end\n"
        "gv_launcher_elf_end:\n"
        ".previous\n");
extern const unsigned char gv_launcher_elf[], gv_launcher_elf_end[];

int gv_launcher_install(const char *work_dir, char *path, size_t pathlen, char *msg, size_t msglen)
{
    char tmp[PATH_MAX + 32];
    snprintf(path, pathlen, "%s/" GV_LAUNCHER_FILE, work_dir);
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    size_t n = (size_t)(gv_launcher_elf_end - gv_launcher_elf);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0555);
    /* executable by the sandbox's user whatever eaid's umask */
    if (fd < 0 || fchmod(fd, 0555) < 0 || eai_write_all(fd, gv_launcher_elf, n) < 0 || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        path[0] = '\0';
        return eai_pc_fail(msg, msglen, "%s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        path[0] = '\0';
        return eai_pc_fail(msg, msglen, "rename %s: %s", tmp, strerror(e));
    }
    return 0;
}

/* Append s and its NUL. */
static int put_str(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s) + 1;
    if (*len + n > *cap) {
        size_t c = (*cap ? *cap * 2 : 4096);
        while (c < *len + n)
            c *= 2;
        char *nb = realloc(*buf, c);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    return 0;
}

static int put_list(char **buf, size_t *len, size_t *cap, const json_t *arr)
{
    char count[24];
    snprintf(count, sizeof(count), "%zu", json_array_size(arr));
    if (put_str(buf, len, cap, count) < 0)
        return -1;
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (put_str(buf, len, cap, json_string_value(json_array_get(arr, i))) < 0)
            return -1;
    return 0;
}

int gv_launch_write(const struct eai_pc_bundle *b, const struct eai_iso_job *job, char *line, size_t linelen,
                    char *msg, size_t msglen)
{
    json_t *args = NULL, *env = NULL;
    if (eai_pc_oci_args_env(job, &args, &env) < 0)
        return eai_pc_fail(msg, msglen, "launch file: no command");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    /* the same argv, env and cwd as the process of a cold run (gvisor_fs.c) */
    int rc = put_str(&buf, &len, &cap, "EAI-LAUNCH-1") < 0 || put_str(&buf, &len, &cap, "/tmp") < 0 ||
             put_list(&buf, &len, &cap, args) < 0 || put_list(&buf, &len, &cap, env) < 0 ||
             put_str(&buf, &len, &cap, job->stdin_len > 0 || eai_pc_job_stdin_stream(job) ? "1" : "0") < 0;
    json_decref(args);
    json_decref(env);
    if (rc || len > GV_LAUNCH_MAX) {
        free(buf);
        return eai_pc_fail(msg, msglen, "launch file: %s", rc ? "out of memory" : "command and env too large");
    }
    unsigned char rnd[8] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        free(buf);
        return eai_pc_fail(msg, msglen, "launch file: getrandom: %s", strerror(errno));
    }
    char name[64], path[PATH_MAX + 64];
    snprintf(name, sizeof(name), ".eai-launch-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5], rnd[6], rnd[7]);
    snprintf(path, sizeof(path), "%s/tmp/%s", b->dir, name);
    /* in the sandbox's own tmpfs, its user's (the launcher unlinks it from
     * the sticky /tmp), never through a link */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || fchown(fd, b->uid, b->uid) < 0 || eai_write_all(fd, buf, len) < 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        free(buf);
        return eai_pc_fail(msg, msglen, "launch file: %s", strerror(e));
    }
    close(fd);
    free(buf);
    /* fixed length: the launcher reads exactly LINE_LEN (34) bytes */
    if (snprintf(line, linelen, "/tmp/%s\n", name) != GV_LAUNCH_LINE_LEN)
        return eai_pc_fail(msg, msglen, "launch line: not %d bytes", GV_LAUNCH_LINE_LEN);
    return 0;
}
