// kvserve-bench --inspect-load N: how much N concurrent HeadImportance calls delay a short
// Generate's first token. Measures the same probe (a few prompt tokens, a few greedy output
// tokens) alone, then while the calls run back to back, and reports both and their ratio.
#pragma once

#include <string>

#include "kvserve.grpc.pb.h"

namespace kvserve {

struct InspectLoadOptions {
  int calls = 2;            // HeadImportance calls in flight throughout the loaded phase
  int inspect_tokens = 64;  // prompt tokens of each call
  int probes = 40;          // probe Generates per phase, one at a time
  int probe_prompt = 4;     // prompt tokens of a probe
  int probe_output = 4;     // output tokens of a probe
  unsigned seed = 0;
};

// Prints the table; writes JSON to json_out if not empty. Returns 0 when every probe succeeded.
int run_inspect_load(v1::Inference::Stub& stub, const v1::GetModelInfoResponse& info, const InspectLoadOptions& o,
                     const std::string& json_out);

}  // namespace kvserve
