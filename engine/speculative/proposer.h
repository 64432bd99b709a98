// The one interface speculative decoding's proposers share: given the sequences that speculate
// in a step, each gets up to k tokens it is likely to continue with. Verification (the target
// model's pass) decides what is kept, so a proposer only costs time when it guesses wrong.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvserve {

struct ProposalRequest {
  uint64_t id = 0;                  // the sequence's id: a proposer may keep state per sequence
  std::span<const int32_t> tokens;  // [n] the sequence so far (prompt, then output)
  int32_t k = 0;                    // tokens to propose at most (>= 1)
  std::vector<int32_t>* out = nullptr;  // cleared, then filled with 0..k proposed tokens
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual void propose(std::span<const ProposalRequest> requests) = 0;
  // The sequence has ended: whatever the proposer kept for it is released.
  virtual void forget(uint64_t /*id*/) {}
  // Seconds one proposing pass takes lately (a proposal of k tokens takes k passes); 0 when
  // proposing costs next to nothing.
  virtual double pass_seconds() const { return 0.0; }
};

}  // namespace kvserve
