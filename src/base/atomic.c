/* The word of usched__full_fence under TSan (atomic.h). */
#include "base/atomic.h"

_Atomic uint32_t usched__fence_word;
