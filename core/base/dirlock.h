/*
 * One eaid a data dir: `eaid serve` holds an exclusive flock(2) on
 * <data_dir>/eaid.lock for its whole life (the kernel drops it when the
 * process ends, even by kill -9), so a second server on the same data dir
 * is refused at start instead of sharing its SQLite file, pepper and the
 * backends' work dirs.  The CLI commands do not take it.
 */
#ifndef EAI_CORE_BASE_DIRLOCK_H
#define EAI_CORE_BASE_DIRLOCK_H

#include "base/errors.h"

/* Lock dir; the descriptor (close-on-exec) in *fd.  -1 and *err when
 * another process holds it (its pid in the message) or on I/O errors. */
int eai_dir_lock(const char *dir, int *fd, struct eai_error **err);
/* Drop it (fd < 0: nothing). */
void eai_dir_unlock(int fd);

#endif
