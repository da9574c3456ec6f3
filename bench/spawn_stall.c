/*
 * How long the caller of a spawn is held (plugins/common/pc_child.c): glibc's
 * posix_spawn (a vfork: the caller waits until the child has exec'd) against
 * _Fork + execve (the caller returns at once), with HOGS busy processes
 * competing for the CPUs, as a sandbox boot's threads do.  Not a CI test.
 *
 *   cc -O2 -o /tmp/spawn_stall bench/spawn_stall.c && /tmp/spawn_stall [N [HOGS [HEAP_MIB]]]
 *
 * N spawns of `runsc --version` (or /bin/true) each way, interleaved, with
 * HEAP_MIB (2) of touched heap in the caller (eaid's anonymous RSS idle);
 * prints p50, p99 and max of the time the spawning call takes, and the
 * ratio fork/posix_spawn.  Bounded: N <= 2000, HOGS <= 16, the hogs end
 * with the program (and after 120 s in any case).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static pid_t by_posix_spawn(char *const av[])
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    if (posix_spawn(&pid, av[0], &fa, NULL, av, environ) != 0)
        pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

static pid_t by_fork(char *const av[])
{
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid_t pid = _Fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        close_range(3, ~0U, 0);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(av[0], av, environ);
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return pid;
}

static void report(const char *name, double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    printf("%-12s p50=%.3f ms p99=%.3f ms max=%.3f ms\n", name, v[n / 2], v[n * 99 / 100], v[n - 1]);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200, hogs = argc > 2 ? atoi(argv[2]) : 8;
    int heap_mib = argc > 3 ? atoi(argv[3]) : 2;
    if (n < 10 || n > 2000 || hogs < 0 || hogs > 16 || heap_mib < 0 || heap_mib > 512) {
        fprintf(stderr, "usage: spawn_stall [N 10..2000 [HOGS 0..16 [HEAP_MIB 0..512]]]\n");
        return 2;
    }
    char *prog = access("/usr/bin/runsc", X_OK) == 0 ? "/usr/bin/runsc" : "/bin/true";
    char *av[] = {prog, "--version", NULL};
    size_t heap_len = (size_t)heap_mib << 20;
    char *heap = heap_len ? malloc(heap_len) : NULL;
    if (heap)
        memset(heap, 1, heap_len);
    pid_t hog[16];
    for (int i = 0; i < hogs; i++) {
        hog[i] = fork();
        if (hog[i] == 0) {
            alarm(120);
            for (volatile unsigned long x = 0;; x++) {
            }
        }
    }
    double *ps = calloc((size_t)n, sizeof(double)), *fk = calloc((size_t)n, sizeof(double));
    if (!ps || !fk)
        return 1;
    for (int i = 0; i < 2 * n; i++) {
        double t0 = now_ms();
        pid_t pid = (i & 1) ? by_fork(av) : by_posix_spawn(av);
        double d = now_ms() - t0;
        (i & 1 ? fk : ps)[i / 2] = d;
        if (heap)
            heap[((size_t)i * 4096) % heap_len]++; /* the caller writes on (copy-on-write after a fork) */
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    for (int i = 0; i < hogs; i++) {
        kill(hog[i], SIGKILL);
        waitpid(hog[i], NULL, 0);
    }
    printf("%s, %d each way, %d hogs, %d MiB heap\n", prog, n, hogs, heap_mib);
    double ps50, fk50;
    report("posix_spawn", ps, n);
    ps50 = ps[n / 2];
    report("fork", fk, n);
    fk50 = fk[n / 2];
    printf("fork_vs_posix_spawn_p50=%.2f fork_vs_posix_spawn_p99=%.2f\n", fk50 / ps50, fk[n * 99 / 100] / ps[n * 99 / 100]);
    free(ps);
    free(fk);
    free(heap);
    return 0;
}
