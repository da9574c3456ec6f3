/*
 * Sandboxes never outlive eaid (issue 19 item 5).  Each sandbox run on this
 * host gets a watchdog: a tiny /bin/sh process (own process group, so a
 * signal to eaid's group does not reach it) whose stdin is one end of a
 * socketpair; only eaid holds the other end (close-on-exec, and every
 * child we spawn starts with fds 0-2 only).
 *
 *   eaid done with the sandbox  -> eai_pc_watchdog_disarm(): "disarm\n",
 *                                  close; the watchdog exits, reaped on
 *                                  the loop like any child
 *   eaid gone (kill -9, crash)  -> the kernel closes eaid's end; the
 *                                  watchdog reads EOF and kills the
 *                                  sandbox: `<runtime> kill <cid> KILL`,
 *                                  SIGKILL to every process of the cgroup
 *                                  leaf (v2, or every v1 controller),
 *                                  `<runtime> delete --force <cid>`, rmdir
 *                                  the leaves, unmount <dir>/tmp, remove
 *                                  the bundle
 *
 * Nothing of the sandbox can be reattached after eaid died (its stdio went
 * with eaid), so the watchdog does not wait for the deadline: the sandbox
 * dies at once, well within its time limit.  A restarted eaid marks the
 * execution as interrupted and its start-up sweep removes whatever the
 * watchdog could not.  The watchdog is exec'd, not a fork of eaid, so it
 * costs a shell (no copy-on-write copy of the server's heap).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "eai_pc.h"

/* $1 runtime  $2 its --root=... argument  $3 cid  $4 cgroup path below
 * /sys/fs/cgroup[/<controller>]  $5 bundle dir.  The cgroup path and the
 * bundle are only touched when they name one of our sandboxes ("/eai-"). */
static const char wd_script[] =
    "IFS= read -r w\n"
    "[ \"$w\" = disarm ] && exit 0\n"
    "rt=$1 root=$2 cid=$3 cg=$4 dir=$5\n"
    "case \"$cg\" in */eai-*) ;; *) cg=/eai-watchdog-none/x ;; esac\n"
    "timeout -s KILL 10 \"$rt\" \"$root\" kill \"$cid\" KILL >/dev/null 2>&1\n"
    "i=0\n"
    "while [ \"$i\" -lt 100 ]; do\n"
    "  left=\n"
    "  for d in /sys/fs/cgroup/\"$cg\" /sys/fs/cgroup/*/\"$cg\"; do\n"
    "    [ -r \"$d/cgroup.procs\" ] || continue\n"
    "    for p in $(cat \"$d/cgroup.procs\" 2>/dev/null); do kill -9 \"$p\" 2>/dev/null; left=1; done\n"
    "  done\n"
    "  [ -z \"$left\" ] && break\n"
    "  sleep 0.05; i=$((i+1))\n"
    "done\n"
    "timeout -s KILL 20 \"$rt\" \"$root\" delete --force \"$cid\" >/dev/null 2>&1\n"
    "for d in /sys/fs/cgroup/\"$cg\" /sys/fs/cgroup/*/\"$cg\"; do [ -d \"$d\" ] && rmdir \"$d\" 2>/dev/null; done\n"
    "case \"$dir\" in /*/eai-*) umount -l \"$dir/tmp\" 2>/dev/null; rm -rf --one-file-system -- \"$dir\" ;; esac\n"
    "exit 0\n";

/* Owner of every watchdog child (eai_pc_child_reap_all). */
static const char wd_owner;

int eai_pc_watchdog_arm(struct event_base *base, const struct eai_pc_wd *wd)
{
    int sv[2];
    if (!wd->runtime || !wd->root_arg || !wd->cid || !wd->cgpath || !wd->dir) {
        errno = EINVAL;
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    char *argv[] = {"/bin/sh",         "-c",           (char *)wd_script, "eai-watchdog",   (char *)wd->runtime,
                    (char *)wd->root_arg, (char *)wd->cid, (char *)wd->cgpath, (char *)wd->dir, NULL};
    struct eai_pc_child *c = eai_pc_child_spawn(base, &wd_owner, argv, sv[1], -1, -1, 0, 0, NULL, NULL);
    int saved = errno;
    close(sv[1]);
    if (!c) {
        close(sv[0]);
        errno = saved;
        return -1;
    }
    shutdown(sv[0], SHUT_RD);
    return sv[0];
}

void eai_pc_watchdog_disarm(int *fd)
{
    if (!fd || *fd < 0)
        return;
    static const char msg[] = "disarm\n";
    (void)!send(*fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(*fd);
    *fd = -1;
}

void eai_pc_watchdog_reap_all(void)
{
    eai_pc_child_reap_all(&wd_owner);
}
