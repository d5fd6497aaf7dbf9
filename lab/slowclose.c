/*
 * The close-latency lab: an LD_PRELOAD library that makes close(2) behave like it does where
 * closing is slow (Windows with Defender, NFS, FUSE) or failing, on any Linux machine.
 *
 *   FASTWRITE_LAB_CLOSE_MS=5      every close of a regular file opened for writing waits 5 ms
 *                                 (fractions allowed: 0.5), after the real close
 *   FASTWRITE_LAB_FAIL_CLOSE=bad  such a close whose path contains "bad" fails with EIO (the
 *                                 descriptor is closed all the same, as the kernel does)
 *   FASTWRITE_LAB_FAIL_EVERY=N    ... or every Nth such close fails with EIO
 *   FASTWRITE_LAB_FAIL_WRITE=bad  a write(2) to such a file whose path contains "bad" fails
 *                                 with EDQUOT, as a user's exhausted disk quota makes it (the
 *                                 kernels here have no quota support to make it for real)
 *   FASTWRITE_LAB_KILL_AT_WRITE=N the Nth write(2) to such a file writes the first half of its
 *                                 bytes, and then the process kills itself with SIGKILL: a kill
 *                                 inside a chosen file's writing, for tests/kills.rs
 *
 * Only descriptors of regular files open for writing are touched: pipes, sockets, directories
 * and files open for reading close as usual. Built by lab/build; used by tests/faults.rs and
 * benches/close-lab.sh.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static const char *fail_write_substring;
static long delay_ns;
static const char *fail_substring;
static long fail_every;
static atomic_long written_closes;
static long kill_at_write;
static atomic_long writes;

__attribute__((constructor)) static void lab_init(void)
{
    real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    fail_write_substring = getenv("FASTWRITE_LAB_FAIL_WRITE");
    if (fail_write_substring && !*fail_write_substring)
        fail_write_substring = NULL;
    const char *ms = getenv("FASTWRITE_LAB_CLOSE_MS");
    if (ms && *ms)
        delay_ns = (long)(strtod(ms, NULL) * 1e6);
    fail_substring = getenv("FASTWRITE_LAB_FAIL_CLOSE");
    if (fail_substring && !*fail_substring)
        fail_substring = NULL;
    const char *kill_at = getenv("FASTWRITE_LAB_KILL_AT_WRITE");
    if (kill_at && *kill_at)
        kill_at_write = strtol(kill_at, NULL, 10);
    const char *every = getenv("FASTWRITE_LAB_FAIL_EVERY");
    if (every && *every)
        fail_every = strtol(every, NULL, 10);
}

/* Whether fd is a regular file open for writing: what a writer's close looks like. */
static int is_written_file(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY)
        return 0;
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whether fd's path contains `substring`. */
static int path_contains(int fd, const char *substring)
{
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return 0;
    path[n] = '\0';
    return strstr(path, substring) != NULL;
}

ssize_t write(int fd, const void *buf, size_t count)
{
    if (!real_write)
        lab_init();
    if (fail_write_substring && is_written_file(fd) && path_contains(fd, fail_write_substring)) {
        errno = EDQUOT;
        return -1;
    }
    if (kill_at_write > 0 && is_written_file(fd) && atomic_fetch_add(&writes, 1) + 1 == kill_at_write) {
        real_write(fd, buf, count / 2);
        kill(getpid(), SIGKILL);
    }
    return real_write(fd, buf, count);
}

int close(int fd)
{
    if (!real_close)
        lab_init();
    if ((delay_ns == 0 && !fail_substring && fail_every <= 0) || !is_written_file(fd))
        return real_close(fd);

    int fail = 0;
    if (fail_substring)
        fail = path_contains(fd, fail_substring);
    long nth = atomic_fetch_add(&written_closes, 1) + 1;
    if (fail_every > 0 && nth % fail_every == 0)
        fail = 1;

    int rc = real_close(fd);
    if (delay_ns > 0) {
        struct timespec ts = {delay_ns / 1000000000L, delay_ns % 1000000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    if (rc == 0 && fail) {
        errno = EIO;
        return -1;
    }
    return rc;
}
