/* A program that poses as CPython 3.11 for tests/integration/test_hostile.py: it exports _PyRuntime
 * and Py_Version and lays out, with CPython 3.11's offsets, THREADS thread states whose frame points
 * at itself, its code object's line table 1 MiB long. A reader that walks frame chains without a
 * cycle check, or decodes the table again at every frame, takes hours. Run as nobody.
 *   fakepython [THREADS]       (1024 by default) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint32_t Py_Version = 0x030b04f0; /* 3.11.4 */
__attribute__((aligned(64))) unsigned char _PyRuntime[4096];

static void put(void *object, size_t at, const void *value) {
    memcpy((char *)object + at, &value, sizeof value);
}

static void *string(void *type, const char *text) {
    size_t length = strlen(text);
    char *object = calloc(1, 48 + length + 1);
    put(object, 8, type);
    memcpy(object + 16, &length, 8);
    uint32_t state = 1 << 2 | 1 << 5 | 1 << 6; /* kind 1, compact, ascii */
    memcpy(object + 32, &state, 4);
    memcpy(object + 48, text, length);
    return object;
}

int main(int argc, char **argv) {
    long threads = argc > 1 ? atol(argv[1]) : 1024;
    char *type = calloc(1, 512);
    put(type, 24, "code");
    size_t table_size = 1 << 20;
    char *table = calloc(1, 32 + table_size);
    memcpy(table + 16, &table_size, 8);
    memset(table + 32, 0x80, table_size); /* one long entry after another */
    char *code = calloc(1, 512);
    put(code, 8, type);
    put(code, 112, string(type, "fake.py"));
    put(code, 120, string(type, "spin"));
    put(code, 128, string(type, "spin"));
    put(code, 136, table);
    int32_t first = 1;
    memcpy(code + 72, &first, 4);
    char *frame = calloc(1, 256);
    put(frame, 32, code);
    put(frame, 48, frame); /* the frame before it: itself */
    put(frame, 56, code + 184 + 8);
    char *cframe = calloc(1, 64);
    put(cframe, 8, frame);
    char **states = calloc(threads, sizeof *states);
    for (long i = 0; i < threads; i++)
        states[i] = calloc(1, 512);
    for (long i = 0; i < threads; i++) {
        put(states[i], 8, i + 1 < threads ? states[i + 1] : NULL);
        put(states[i], 56, cframe);
        uint64_t tid = i ? 100000 + i : (uint64_t)getpid(); /* the first: the process's own thread */
        memcpy(states[i] + 160, &tid, 8);
    }
    char *interp = calloc(1, 1024);
    put(interp, 16, threads ? states[0] : NULL);
    put(_PyRuntime, 40, interp);
    printf("ready pid=%d\n", getpid());
    fflush(stdout);
    for (;;) { /* some work, as the tests' targets do (a tenth of a core) */
        struct timespec start, now, rest = {0, 9000000};
        clock_gettime(CLOCK_MONOTONIC, &start);
        do
            clock_gettime(CLOCK_MONOTONIC, &now);
        while ((now.tv_sec - start.tv_sec) * 1000000000L + now.tv_nsec - start.tv_nsec < 1000000);
        nanosleep(&rest, NULL);
    }
}
