/* Fault injection for the sweeps of tests/test_faults.c: the program is
 * linked with -Wl,--wrap= for the allocation and write functions
 * (tests/CMakeLists.txt, CN_FAULT_WRAP), so every call the test and
 * libchutney.a make goes through fault_inject.c, which counts the calls of
 * one class while armed and makes the Nth fail. Calls from shared
 * libraries are not seen: the library hands protobuf-c an allocator of its
 * own for that reason (src/io/onnx_import.c). */
#ifndef CN_TEST_FAULT_INJECT_H
#define CN_TEST_FAULT_INJECT_H

#include <stdbool.h>

typedef enum {
    FI_ALLOC, /* malloc, calloc, realloc, strdup, strndup, posix_memalign, aligned_alloc */
    FI_WRITE  /* fwrite, fputs, fputc, putc, puts, putchar, printf, vprintf, fprintf,
                 vfprintf, fflush, fclose, write, fsync, rename: to anything but stderr */
} fi_class;

/* How a failing write fails: ENOSPC or EIO from the call, or a short
 * write (part of the bytes written; on a stream, then the error flag, as
 * stdio does; write(2) returns the short count without an error). */
typedef enum { FI_ENOSPC, FI_EIO, FI_SHORT } fi_write_kind;

/* Counts the calls of class c from now on; the nth fails (n 0: none). */
void fi_arm(fi_class c, long nth, fi_write_kind kind);
/* Stops counting; returns how many calls were counted. */
long fi_disarm(void);
/* Did the armed call fail? */
bool fi_fired(void);
/* Set: the failing call raises SIGTRAP first, for a debugger's backtrace
 * (test_faults with CN_FAULT_TRAP=SCENARIO:N). */
extern bool fi_trap;

#endif
