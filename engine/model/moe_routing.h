// Which experts a token goes to and with what weight, from its router logits: the gating
// function, top-k, and the weights' normalisation and scale, as llama.cpp's build_moe_ffn does
// them (src/llama-graph.cpp). Plain arithmetic on one token at a time, no state.
#pragma once

#include <cstdint>

namespace kvserve {

// How router logits become the scores that choose experts and the weights of those chosen.
enum class MoeGating : uint8_t {
  kSoftmax,          // p = softmax over every expert; choose the k largest p, weights p (Qwen3-MoE, DeepSeek-V2)
  kSigmoid,          // p = sigmoid of each logit; choose the k largest p, weights p (DeepSeek-V3 style)
  kSoftmaxOfChosen,  // choose the k largest logits, weights softmax over those k (gpt-oss)
};

struct MoeRouting {
  int32_t n_expert = 0;
  int32_t n_used = 0;           // experts per token (top-k)
  MoeGating gating = MoeGating::kSoftmax;
  bool normalize = false;       // weights divided by their sum (at least 2^-14, as llama.cpp clamps it)
  float scale = 1.0f;           // weights multiplied by it afterwards
};

// logits: [n_expert] one token's router output (its bias added). experts: [n_used] the chosen,
// best first (a tie goes to the lower index); weights: [n_used] theirs.
void route_token(const float* logits, const MoeRouting& r, int32_t* experts, float* weights);

}  // namespace kvserve
