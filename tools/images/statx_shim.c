/*
 * eai statx shim: preloaded into sandbox images (/etc/ld.so.preload).
 *
 * runsc 0.0~20221219 rejects statx(2) calls whose flags carry
 * AT_NO_AUTOMOUNT with EINVAL, which breaks coreutils (`ls /`, `stat`).
 * Automount points do not exist inside a gVisor sandbox, so clearing the
 * flag changes nothing else.  Only libc is used: the image has no more.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default")))
int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
    flags &= ~AT_NO_AUTOMOUNT;
    return (int)syscall(SYS_statx, dirfd, path, flags, mask, buf);
}
