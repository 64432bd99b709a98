// <immintrin.h> for the kernel sources, included with the standard headers (before
// KVSERVE_KERNEL_TARGET_BEGIN): GCC 12 warns inside its own AVX-512 header
// (_mm512_undefined_ps is self-initialised), which would fail a build that treats warnings as
// errors.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
