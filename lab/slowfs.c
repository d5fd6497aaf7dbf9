/*
 * slowfs: the lab's FUSE filesystem. A passthrough of a backing folder in which each kind of
 * operation can be given its own delay, every operation is counted, and chosen closes fail.
 * What a network or cloud mount costs, one cost at a time: the round trip of a create alone, of a
 * write alone, of a close (FLUSH) alone, of an attribute change alone.
 *
 *   slowfs [-o OPTION,...] BACKING MNT      (and libfuse's own options: -f, -s, -o max_threads=N)
 *
 * Options of its own:
 *   delay_OP=MS      sleep MS milliseconds (a decimal) in each OP before doing it. OP is a
 *                    libfuse operation (getattr, create, open, write, read, flush, release, mkdir,
 *                    symlink, link, rename, unlink, rmdir, chmod, chown, truncate, utimens,
 *                    readdir, readlink, statfs, fsync, ...) or a class: lookup (= getattr),
 *                    setattr (= chmod, chown, truncate, utimens), all (every operation).
 *   counts=FILE      when the filesystem is unmounted, write "OP COUNT PEAK" lines to FILE: how
 *                    many of each operation the kernel asked for (the round trips a network
 *                    filesystem would make) and, for a delayed one, the most that waited at
 *                    once (the requests in flight); then "total COUNT". getattr counts the kernel's
 *                    LOOKUP and GETATTR requests; one SETATTR request counts once for each
 *                    attribute it changes (chmod, chown, truncate, utimens), as libfuse calls.
 *   fail_flush=TEXT  FLUSH (the close(2) of a file) fails with EIO for files whose name contains
 *                    TEXT: a close that fails on a real mount, as NFS reports a failed write-back.
 *
 * lab/slowfs mounts and unmounts it. Built by lab/build (needs libfuse3-dev and pkg-config).
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

enum op {
    OP_GETATTR, OP_READLINK, OP_MKDIR, OP_UNLINK, OP_RMDIR, OP_SYMLINK, OP_RENAME, OP_LINK,
    OP_CHMOD, OP_CHOWN, OP_TRUNCATE, OP_OPEN, OP_READ, OP_WRITE, OP_STATFS, OP_FLUSH,
    OP_RELEASE, OP_FSYNC, OP_SETXATTR, OP_GETXATTR, OP_LISTXATTR, OP_REMOVEXATTR, OP_OPENDIR,
    OP_READDIR, OP_RELEASEDIR, OP_ACCESS, OP_CREATE, OP_UTIMENS, OP_FALLOCATE, OP_LSEEK,
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    "getattr", "readlink", "mkdir", "unlink", "rmdir", "symlink", "rename", "link",
    "chmod", "chown", "truncate", "open", "read", "write", "statfs", "flush",
    "release", "fsync", "setxattr", "getxattr", "listxattr", "removexattr", "opendir",
    "readdir", "releasedir", "access", "create", "utimens", "fallocate", "lseek",
};

static struct {
    int base;                   /* the backing folder, opened once */
    char *backing;              /* its path, for the xattr calls that take one */
    char *counts;               /* where to write the counts at unmount */
    char *fail_flush;           /* fail the flushes of names containing this */
    double delay_ms[OP_COUNT];
    unsigned long count[OP_COUNT];
    unsigned long waiting[OP_COUNT]; /* in their delay now */
    unsigned long peak[OP_COUNT];    /* the most that waited at once */
} fs;

/*
 * libfuse's high-level API calls getattr itself after a successful create, mkdir, symlink, link
 * and attribute change, to answer the kernel with the new entry's attributes: that getattr is
 * part of the same request, not a round trip of its own. The operation marks its thread, and the
 * getattr that follows is neither counted nor delayed.
 */
static __thread int answering;

static int done(int res) {
    if (res == 0)
        answering = 1;
    return res;
}

/* Counts OP and waits its delay: the one call at the top of every operation. */
static void cost(enum op op) {
    __atomic_fetch_add(&fs.count[op], 1, __ATOMIC_RELAXED);
    double ms = fs.delay_ms[op];
    if (ms > 0) {
        unsigned long now = __atomic_add_fetch(&fs.waiting[op], 1, __ATOMIC_RELAXED);
        unsigned long peak = __atomic_load_n(&fs.peak[op], __ATOMIC_RELAXED);
        while (now > peak && !__atomic_compare_exchange_n(&fs.peak[op], &peak, now, 1,
                                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
        struct timespec t = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
        while (nanosleep(&t, &t) == -1 && errno == EINTR) {
        }
        __atomic_sub_fetch(&fs.waiting[op], 1, __ATOMIC_RELAXED);
    }
}

/* A path under the mount as a path relative to the backing folder ("." for the root). */
static const char *rel(const char *path) {
    while (*path == '/')
        path++;
    return *path ? path : ".";
}

#define TRY(call) ((call) == -1 ? -errno : 0)

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    if (answering)
        answering = 0;
    else
        cost(OP_GETATTR);
    if (fi)
        return TRY(fstat((int)fi->fh, st));
    return TRY(fstatat(fs.base, rel(path), st, AT_SYMLINK_NOFOLLOW));
}

static int fs_readlink(const char *path, char *buf, size_t size) {
    cost(OP_READLINK);
    ssize_t n = readlinkat(fs.base, rel(path), buf, size - 1);
    if (n == -1)
        return -errno;
    buf[n] = '\0';
    return 0;
}

static int fs_mkdir(const char *path, mode_t mode) {
    cost(OP_MKDIR);
    return done(TRY(mkdirat(fs.base, rel(path), mode)));
}

static int fs_unlink(const char *path) {
    cost(OP_UNLINK);
    return TRY(unlinkat(fs.base, rel(path), 0));
}

static int fs_rmdir(const char *path) {
    cost(OP_RMDIR);
    return TRY(unlinkat(fs.base, rel(path), AT_REMOVEDIR));
}

static int fs_symlink(const char *target, const char *path) {
    cost(OP_SYMLINK);
    return done(TRY(symlinkat(target, fs.base, rel(path))));
}

static int fs_rename(const char *from, const char *to, unsigned int flags) {
    cost(OP_RENAME);
    return TRY(renameat2(fs.base, rel(from), fs.base, rel(to), flags));
}

static int fs_link(const char *from, const char *to) {
    cost(OP_LINK);
    return done(TRY(linkat(fs.base, rel(from), fs.base, rel(to), 0)));
}

static int fs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
    cost(OP_CHMOD);
    if (fi)
        return done(TRY(fchmod((int)fi->fh, mode)));
    return done(TRY(fchmodat(fs.base, rel(path), mode, 0)));
}

static int fs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
    cost(OP_CHOWN);
    if (fi)
        return done(TRY(fchown((int)fi->fh, uid, gid)));
    return done(TRY(fchownat(fs.base, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW)));
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    cost(OP_TRUNCATE);
    if (fi)
        return done(TRY(ftruncate((int)fi->fh, size)));
    int fd = openat(fs.base, rel(path), O_WRONLY | O_CLOEXEC);
    if (fd == -1)
        return -errno;
    int res = TRY(ftruncate(fd, size));
    close(fd);
    return done(res);
}

static int fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
    cost(OP_UTIMENS);
    if (fi)
        return done(TRY(futimens((int)fi->fh, tv)));
    return done(TRY(utimensat(fs.base, rel(path), tv, AT_SYMLINK_NOFOLLOW)));
}

static int fs_open(const char *path, struct fuse_file_info *fi) {
    cost(OP_OPEN);
    int fd = openat(fs.base, rel(path), fi->flags & ~O_NOFOLLOW);
    if (fd == -1)
        return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    cost(OP_CREATE);
    int fd = openat(fs.base, rel(path), fi->flags | O_CREAT, mode);
    if (fd == -1)
        return -errno;
    fi->fh = (uint64_t)fd;
    return done(0);
}

static int fs_read(const char *path, char *buf, size_t size, off_t off,
                   struct fuse_file_info *fi) {
    (void)path;
    cost(OP_READ);
    ssize_t n = pread((int)fi->fh, buf, size, off);
    return n == -1 ? -errno : (int)n;
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi) {
    (void)path;
    cost(OP_WRITE);
    ssize_t n = pwrite((int)fi->fh, buf, size, off);
    return n == -1 ? -errno : (int)n;
}

static int fs_statfs(const char *path, struct statvfs *st) {
    (void)path;
    cost(OP_STATFS);
    return TRY(fstatvfs(fs.base, st));
}

static int fs_flush(const char *path, struct fuse_file_info *fi) {
    cost(OP_FLUSH);
    if (fs.fail_flush && path) {
        const char *name = strrchr(path, '/');
        if (strstr(name ? name + 1 : path, fs.fail_flush))
            return -EIO;
    }
    /* As close(2) of the backing file would: flush a duplicate, keep the handle for release. */
    int fd = dup((int)fi->fh);
    if (fd == -1)
        return -errno;
    return TRY(close(fd));
}

static int fs_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    cost(OP_RELEASE);
    close((int)fi->fh);
    return 0;
}

static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path;
    cost(OP_FSYNC);
    return TRY(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static int fs_fallocate(const char *path, int mode, off_t off, off_t len,
                        struct fuse_file_info *fi) {
    (void)path;
    cost(OP_FALLOCATE);
    return TRY(fallocate((int)fi->fh, mode, off, len));
}

static off_t fs_lseek(const char *path, off_t off, int whence, struct fuse_file_info *fi) {
    (void)path;
    cost(OP_LSEEK);
    off_t res = lseek((int)fi->fh, off, whence);
    return res == -1 ? -errno : res;
}

/* The xattr calls take a path: the backing folder's path joined to the entry's. */
static int backing_path(const char *path, char *out) {
    int n = snprintf(out, PATH_MAX, "%s/%s", fs.backing, rel(path));
    return n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int fs_setxattr(const char *path, const char *name, const char *value, size_t size,
                       int flags) {
    cost(OP_SETXATTR);
    char p[PATH_MAX];
    int res = backing_path(path, p);
    return res ? res : TRY(lsetxattr(p, name, value, size, flags));
}

static int fs_getxattr(const char *path, const char *name, char *value, size_t size) {
    cost(OP_GETXATTR);
    char p[PATH_MAX];
    int res = backing_path(path, p);
    if (res)
        return res;
    ssize_t n = lgetxattr(p, name, value, size);
    return n == -1 ? -errno : (int)n;
}

static int fs_listxattr(const char *path, char *list, size_t size) {
    cost(OP_LISTXATTR);
    char p[PATH_MAX];
    int res = backing_path(path, p);
    if (res)
        return res;
    ssize_t n = llistxattr(p, list, size);
    return n == -1 ? -errno : (int)n;
}

static int fs_removexattr(const char *path, const char *name) {
    cost(OP_REMOVEXATTR);
    char p[PATH_MAX];
    int res = backing_path(path, p);
    return res ? res : TRY(lremovexattr(p, name));
}

static int fs_opendir(const char *path, struct fuse_file_info *fi) {
    cost(OP_OPENDIR);
    int fd = openat(fs.base, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd == -1)
        return -errno;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int err = errno;
        close(fd);
        return -err;
    }
    fi->fh = (uint64_t)(uintptr_t)dir;
    return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    (void)path;
    (void)flags;
    cost(OP_READDIR);
    DIR *dir = (DIR *)(uintptr_t)fi->fh;
    if (off == 0)
        rewinddir(dir);
    else
        seekdir(dir, off);
    struct dirent *d;
    while ((errno = 0, d = readdir(dir))) {
        struct stat st = {.st_ino = d->d_ino, .st_mode = (mode_t)DTTOIF(d->d_type)};
        if (fill(buf, d->d_name, &st, telldir(dir), 0))
            return 0;
    }
    return -errno;
}

static int fs_releasedir(const char *path, struct fuse_file_info *fi) {
    (void)path;
    cost(OP_RELEASEDIR);
    closedir((DIR *)(uintptr_t)fi->fh);
    return 0;
}

static int fs_access(const char *path, int mask) {
    cost(OP_ACCESS);
    return TRY(faccessat(fs.base, rel(path), mask, AT_SYMLINK_NOFOLLOW));
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    (void)conn;
    cfg->use_ino = 1; /* inode numbers pass through: hard links stay visible as such */
    return NULL;
}

static void fs_destroy(void *data) {
    (void)data;
    if (!fs.counts)
        return;
    FILE *f = fopen(fs.counts, "w");
    if (!f) {
        perror(fs.counts);
        return;
    }
    unsigned long total = 0;
    for (int i = 0; i < OP_COUNT; i++) {
        unsigned long n = __atomic_load_n(&fs.count[i], __ATOMIC_RELAXED);
        if (n)
            fprintf(f, "%s %lu %lu\n", op_names[i], n,
                    __atomic_load_n(&fs.peak[i], __ATOMIC_RELAXED));
        total += n;
    }
    fprintf(f, "total %lu\n", total);
    if (fclose(f))
        perror(fs.counts);
}

static const struct fuse_operations ops = {
    .getattr = fs_getattr,       .readlink = fs_readlink,     .mkdir = fs_mkdir,
    .unlink = fs_unlink,         .rmdir = fs_rmdir,           .symlink = fs_symlink,
    .rename = fs_rename,         .link = fs_link,             .chmod = fs_chmod,
    .chown = fs_chown,           .truncate = fs_truncate,     .open = fs_open,
    .read = fs_read,             .write = fs_write,           .statfs = fs_statfs,
    .flush = fs_flush,           .release = fs_release,       .fsync = fs_fsync,
    .setxattr = fs_setxattr,     .getxattr = fs_getxattr,     .listxattr = fs_listxattr,
    .removexattr = fs_removexattr, .opendir = fs_opendir,     .readdir = fs_readdir,
    .releasedir = fs_releasedir, .init = fs_init,             .destroy = fs_destroy,
    .access = fs_access,         .create = fs_create,         .utimens = fs_utimens,
    .fallocate = fs_fallocate,   .lseek = fs_lseek,
};

/* Sets the delay of OP, or of every operation of a class; 0 when NAME is known. */
static int set_delay(const char *name, double ms) {
    static const struct { const char *class; enum op ops[4]; int n; } classes[] = {
        {"lookup", {OP_GETATTR}, 1},
        {"setattr", {OP_CHMOD, OP_CHOWN, OP_TRUNCATE, OP_UTIMENS}, 4},
    };
    if (!strcmp(name, "all")) {
        for (int i = 0; i < OP_COUNT; i++)
            fs.delay_ms[i] = ms;
        return 0;
    }
    for (size_t c = 0; c < sizeof classes / sizeof *classes; c++)
        if (!strcmp(name, classes[c].class)) {
            for (int i = 0; i < classes[c].n; i++)
                fs.delay_ms[classes[c].ops[i]] = ms;
            return 0;
        }
    for (int i = 0; i < OP_COUNT; i++)
        if (!strcmp(name, op_names[i])) {
            fs.delay_ms[i] = ms;
            return 0;
        }
    return -1;
}

/* Takes this filesystem's options out of the -o list; leaves the rest to libfuse. */
static int take_option(void *data, const char *arg, int key, struct fuse_args *args) {
    (void)data;
    (void)args;
    if (key == FUSE_OPT_KEY_NONOPT && !fs.backing) {
        fs.backing = realpath(arg, NULL);
        if (!fs.backing) {
            perror(arg);
            exit(1);
        }
        return 0;
    }
    if (key != FUSE_OPT_KEY_OPT)
        return 1;
    if (!strncmp(arg, "counts=", 7)) {
        fs.counts = realpath(".", NULL);
        char *file = strdup(arg + 7);
        if (file[0] != '/') { /* the daemon's folder changes: keep the path absolute */
            char *abs;
            if (asprintf(&abs, "%s/%s", fs.counts, file) < 0)
                exit(1);
            free(file);
            file = abs;
        }
        free(fs.counts);
        fs.counts = file;
        return 0;
    }
    if (!strncmp(arg, "fail_flush=", 11)) {
        fs.fail_flush = strdup(arg + 11);
        return 0;
    }
    if (!strncmp(arg, "delay_", 6)) {
        const char *eq = strchr(arg, '=');
        char *end = NULL;
        double ms = eq ? strtod(eq + 1, &end) : -1;
        char name[32];
        size_t len = eq ? (size_t)(eq - arg - 6) : 0;
        if (!eq || end == eq + 1 || *end || ms < 0 || len >= sizeof name) {
            fprintf(stderr, "slowfs: '%s': expected delay_OP=MS\n", arg);
            exit(2);
        }
        memcpy(name, arg + 6, len);
        name[len] = '\0';
        if (set_delay(name, ms)) {
            fprintf(stderr, "slowfs: '%s': no operation or class '%s'\n", arg, name);
            exit(2);
        }
        return 0;
    }
    return 1;
}

int main(int argc, char *argv[]) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    if (fuse_opt_parse(&args, NULL, NULL, take_option) == -1)
        return 2;
    if (!fs.backing) {
        fprintf(stderr, "usage: slowfs [-o delay_OP=MS,counts=FILE,fail_flush=TEXT] BACKING MNT\n");
        return 2;
    }
    fs.base = open(fs.backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fs.base == -1) {
        perror(fs.backing);
        return 1;
    }
    umask(0); /* modes come from the caller, already masked by its kernel */
    int res = fuse_main(args.argc, args.argv, &ops, NULL);
    fuse_opt_free_args(&args);
    return res;
}
