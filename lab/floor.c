/*
 * The close-latency floor of a machine: what perfect deferral costs here, with no filesystem.
 *
 *   floor FILES WRITERS WORK_US CLOSE_MS THREADS
 *
 * WRITERS threads "write" FILES files: each costs WORK_US microseconds of CPU (a busy loop on the
 * thread's CPU clock; calibrate it to fastwrite's CPU time per file). With THREADS > 0, every
 * file is then handed to a pool of THREADS close threads the way fastwrite hands over handles
 * (batches of 8 on a mutex-and-condvar queue, one wake-up per batch, each close thread taking
 * one file and waking the next), and each "close" sleeps CLOSE_MS milliseconds, as the lab's
 * preload library does. With THREADS = 0 nothing is handed over (the run without added latency).
 * Prints the wall time in milliseconds, thread start-up included.
 *
 * No file is opened: the difference between THREADS = 0 and a run with CLOSE_MS > 0 is only what
 * waiting for that many slow closes costs this machine (wake-ups, timers, context switches,
 * starting threads). benches/close-floor.sh compares it with fastwrite's own difference.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCH 8

static long files, work_us, close_ns;
static long next_file, queued, closed, sleeping;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;

static double now_ms(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void burn(long us)
{
    double until = now_ms(CLOCK_THREAD_CPUTIME_ID) + us / 1e3;
    while (now_ms(CLOCK_THREAD_CPUTIME_ID) < until) {
    }
}

static void hand_over(long n)
{
    pthread_mutex_lock(&mu);
    queued += n;
    int wake = sleeping > 0;
    pthread_mutex_unlock(&mu);
    if (wake)
        pthread_cond_signal(&work_cv);
}

static void *writer(void *pooled)
{
    long batch = 0;
    for (;;) {
        pthread_mutex_lock(&mu);
        long i = next_file++;
        pthread_mutex_unlock(&mu);
        if (i >= files)
            break;
        burn(work_us);
        if (pooled && ++batch == BATCH) {
            hand_over(batch);
            batch = 0;
        }
    }
    if (pooled && batch)
        hand_over(batch);
    return NULL;
}

static void *closer(void *unused)
{
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (queued == 0) {
            sleeping++;
            pthread_cond_wait(&work_cv, &mu);
            sleeping--;
        }
        queued--;
        int wake_next = queued > 0 && sleeping > 0;
        pthread_mutex_unlock(&mu);
        if (wake_next)
            pthread_cond_signal(&work_cv);
        struct timespec ts = {close_ns / 1000000000L, close_ns % 1000000000L};
        while (close_ns > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        pthread_mutex_lock(&mu);
        if (++closed == files)
            pthread_cond_signal(&done_cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: floor FILES WRITERS WORK_US CLOSE_MS THREADS\n");
        return 2;
    }
    files = atol(argv[1]);
    long writers = atol(argv[2]);
    work_us = atol(argv[3]);
    close_ns = (long)(atof(argv[4]) * 1e6);
    long threads = atol(argv[5]);
    if (files < 1 || writers < 1 || writers > 256 || work_us < 0 || close_ns < 0 || threads < 0) {
        fprintf(stderr, "floor: FILES and WRITERS (1-256) must be positive, the rest >= 0\n");
        return 2;
    }

    double start = now_ms(CLOCK_MONOTONIC);
    pthread_attr_t small;
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 256 << 10); /* as fastwrite's close threads */
    pthread_attr_setdetachstate(&small, PTHREAD_CREATE_DETACHED);
    for (long i = 0; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, &small, closer, NULL) != 0) {
            fprintf(stderr, "floor: cannot start close thread %ld\n", i);
            return 1;
        }
    }
    pthread_t w[256];
    for (long i = 0; i < writers; i++)
        pthread_create(&w[i], NULL, writer, threads > 0 ? (void *)1 : NULL);
    for (long i = 0; i < writers; i++)
        pthread_join(w[i], NULL);
    if (threads > 0) {
        pthread_mutex_lock(&mu);
        while (closed < files)
            pthread_cond_wait(&done_cv, &mu);
        pthread_mutex_unlock(&mu);
    }
    printf("%.1f\n", now_ms(CLOCK_MONOTONIC) - start);
    return 0;
}
