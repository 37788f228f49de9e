/* Allocation faults for a unit test binary linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign,--wrap=strdup
 * (ALLOC_FAULT_LDFLAGS in the Makefile) and alloc_fault.o: once armed with n,
 * the nth allocation made through those functions fails (NULL, or ENOMEM
 * from posix_memalign), and only that one. Allocations made while paused
 * (the net stub's own, which stand for no code under test) are neither
 * counted nor failed. Single-threaded, as the engines are. */
#ifndef TANDEM_TESTS_ALLOC_FAULT_H
#define TANDEM_TESTS_ALLOC_FAULT_H

#include <stdbool.h>

/* Fails the nth allocation from now on (n >= 1); 0 disarms (what was
 * seen stays readable); ALLOC_FAULT_NONE
 * counts every allocation and fails none. Each counted allocation's call
 * site is recorded (the first ALLOC_FAULT_SITES of them). */
#define ALLOC_FAULT_NONE (~0u)
#define ALLOC_FAULT_SITES 4096
void alloc_fault_arm(unsigned n);
/* The call site of the kth counted allocation (k >= 1) since the last arm,
 * or NULL beyond what was recorded. */
const void *alloc_fault_site(unsigned k);
/* Allocations counted since the last arm. */
unsigned alloc_fault_seen(void);
/* Whether the armed allocation came (and failed). */
bool alloc_fault_fired(void);
/* Nested: while the count is above zero nothing is counted or failed. Weak in
 * the net stub, so that binaries without this file link too. */
void alloc_fault_pause(bool on);

#endif
