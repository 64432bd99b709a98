// Prompt lookup (n-gram) proposals for speculative decoding: the sequence's last n tokens are
// looked for earlier in its own tokens (prompt and output), and the tokens that followed the
// latest such occurrence are proposed. Code edits, rewrites, quoting answers and JSON with
// repeated keys repeat spans of their context, which this finds at no model cost.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "speculative/proposer.h"

namespace kvserve {

struct NgramProposerOptions {
  int32_t ngram_min = 2;  // shortest suffix matched
  int32_t ngram_max = 4;  // longest suffix matched, tried first
};

// Up to k tokens that followed the latest earlier occurrence of the longest suffix of `tokens`
// (of ngram_max down to ngram_min tokens) that occurs earlier; `out` is cleared first and stays
// empty when no suffix recurs. A longer match is preferred to a more recent shorter one.
// tokens: [n] the sequence so far (prompt, then output)
void propose_ngram(std::span<const int32_t> tokens, const NgramProposerOptions& options, int32_t k,
                   std::vector<int32_t>& out);

// propose_ngram behind the proposers' interface; it keeps nothing per sequence.
class NgramProposer : public Proposer {
 public:
  explicit NgramProposer(const NgramProposerOptions& options) : options_(options) {}
  void propose(std::span<const ProposalRequest> requests) override {
    for (const ProposalRequest& r : requests) propose_ngram(r.tokens, options_, r.k, *r.out);
  }

 private:
  NgramProposerOptions options_;
};

}  // namespace kvserve
