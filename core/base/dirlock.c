/* One eaid a data dir (see dirlock.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/dirlock.h"

int eai_dir_lock(const char *dir, int *fd_out, struct eai_error **err)
{
    char path[4096];
    *fd_out = -1;
    if (snprintf(path, sizeof path, "%s/eaid.lock", dir) >= (int)sizeof path)
        return eai_error_set(err, EAI_E_INTERNAL, "data dir %s: path too long", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int e = errno;
        return eai_error_set_sys(err, EAI_E_INTERNAL, e, "lock %s: %s", path, strerror(e));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return eai_error_set(err, EAI_E_CONFLICT,
                                 "data dir %s is in use by another eaid (pid %s, lock %s): each replica needs "
                                 "its own data dir", dir, pid[0] ? pid : "?", path);
        return eai_error_set_sys(err, EAI_E_INTERNAL, e, "lock %s: %s", path, strerror(e));
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)n, 0) != n) {
        /* the lock holds without the pid: only the message is poorer */
    }
    *fd_out = fd;
    return 0;
}

void eai_dir_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* drops the flock */
}
