/* LD_PRELOAD shim for tests/test_durable_save.py: makes one write, fsync or close of a file whose path
 * contains $PGO_FAULT_MATCH fail, as a full disk or a failing device would.
 *
 * $PGO_FAULT selects the fault (read at each call, so a process can change it between cases; a new
 * value re-arms the shim, which otherwise fires once):
 *   write:N   writes reaching byte offset N stop there (a short write), the write at N fails with ENOSPC
 *   fsync     fsync / fdatasync fail with EIO
 *   close     close closes the file and reports EIO (as NFS does when its flush fails)
 *   kill      the process is SIGKILLed at fsync (a writer killed mid-save)
 * anything after a '#' is ignored (a case id, to re-arm the shim with the same fault).
 * pgo_fault_fired() says whether the current fault fired.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static char armed_for[256];
static int fired;

/* The fault to inject now, or NULL. */
static const char *fault(void) {
    const char *f = getenv("PGO_FAULT");
    if (f == NULL || *f == '\0') {
        return NULL;
    }
    if (strncmp(f, armed_for, sizeof armed_for) != 0) {
        snprintf(armed_for, sizeof armed_for, "%s", f);
        fired = 0;
    }
    return fired ? NULL : f;
}

static int matches(int fd) {
    const char *pattern = getenv("PGO_FAULT_MATCH");
    char link[64], target[4096];
    if (pattern == NULL || *pattern == '\0') {
        return 0;
    }
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) {
        return 0;
    }
    target[n] = '\0';
    return strstr(target, pattern) != NULL;
}

int pgo_fault_fired(void) {
    fault();
    return fired;
}

ssize_t write(int fd, const void *buf, size_t count) {
    static ssize_t (*real)(int, const void *, size_t);
    if (real == NULL) {
        real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    }
    const char *f = fault();
    if (f != NULL && strncmp(f, "write:", 6) == 0 && matches(fd)) {
        off_t at = (off_t)atoll(f + 6);
        off_t pos = lseek(fd, 0, SEEK_CUR);
        if (pos >= 0 && pos + (off_t)count > at) {
            if (pos < at) {
                return real(fd, buf, (size_t)(at - pos));
            }
            fired = 1;
            errno = ENOSPC;
            return -1;
        }
    }
    return real(fd, buf, count);
}

static int sync_fault(int fd) {
    const char *f = fault();
    if (f == NULL || !matches(fd)) {
        return 0;
    }
    if (strncmp(f, "kill", 4) == 0) {
        raise(SIGKILL);
    }
    if (strncmp(f, "fsync", 5) == 0) {
        fired = 1;
        errno = EIO;
        return 1;
    }
    return 0;
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) {
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    }
    return sync_fault(fd) ? -1 : real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) {
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    }
    return sync_fault(fd) ? -1 : real(fd);
}

int close(int fd) {
    static int (*real)(int);
    if (real == NULL) {
        real = (int (*)(int))dlsym(RTLD_NEXT, "close");
    }
    const char *f = fault();
    if (f != NULL && strncmp(f, "close", 5) == 0 && matches(fd)) {
        real(fd);
        fired = 1;
        errno = EIO;
        return -1;
    }
    return real(fd);
}
