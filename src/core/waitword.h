/* Sleeping on a 32-bit word until another thread changes it: a futex on
 * Linux, one process-wide condition variable elsewhere. Both may return
 * spuriously, so callers wait in a loop that re-reads the word. */
#ifndef CN_WAITWORD_H
#define CN_WAITWORD_H

#include <stdatomic.h>
#include <stdint.h>

/* Block while *w == expected (returns at once if it already differs). */
void cn_word_wait(_Atomic uint32_t *w, uint32_t expected);
/* Wake every thread blocked on w. Call after changing *w. */
void cn_word_wake_all(_Atomic uint32_t *w);

#endif
