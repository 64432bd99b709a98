#include "speculative/ngram_proposer.h"

#include <algorithm>

namespace kvserve {

void propose_ngram(std::span<const int32_t> tokens, const NgramProposerOptions& options, int32_t k,
                   std::vector<int32_t>& out) {
  out.clear();
  const int64_t size = static_cast<int64_t>(tokens.size());
  if (k <= 0) return;
  for (int64_t n = std::min<int64_t>(options.ngram_max, size - 1); n >= options.ngram_min; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(size - n);
    // Latest occurrence first: its continuation is the likeliest to repeat now. It may overlap
    // the suffix (a run of one repeated token) as long as a token follows it.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(k, size - from);
      out.assign(tokens.begin() + from, tokens.begin() + from + count);
      return;
    }
  }
}

}  // namespace kvserve
