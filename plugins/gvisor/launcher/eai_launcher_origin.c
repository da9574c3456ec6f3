/*
 * glibc's static start-up asks for the program's origin ($ORIGIN, for
 * dlopen search paths) with readlink("/proc/self/exe"), unconditionally
 * (elf/dl-support.c, _dl_non_dynamic_init).  The launcher never loads a
 * shared object, and that one look at /proc/<pid> is not free: on Debian
 * 12's runsc (0.0~20221219) every process that touched its /proc/<pid>
 * leaves something behind in the sandbox's kernel, so a session whose every
 * execution runs the launcher's client grew its checkpoint by ~3 KB and its
 * pause by ~5 ms per execution (measured: 40 runs of a static glibc
 * program, of `readlink /proc/self/exe` or of `cat /proc/self/stat` each
 * added ~125 KB and ~230 ms; 40 runs of this override, of a static program
 * without libc, or of a dynamic /bin/true added nothing; the runsc of 2026
 * does not grow).  This definition replaces glibc's (sysdeps/unix/sysv/
 * linux/dl-origin.c, which defines nothing else, so the archive member is
 * not linked): "(char *) -1" is glibc's own "origin unknown".  Should a
 * glibc ever define it beside a symbol we need, the link fails with a
 * duplicate definition, loudly.
 */
const char *_dl_get_origin(void);

const char *_dl_get_origin(void)
{
    return (const char *)-1;
}
