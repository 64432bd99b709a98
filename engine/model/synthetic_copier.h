// Designed weights for a llama-shaped synthetic model that copies its context, as real models do
// when they rewrite a document or quote their sources: an induction circuit built by hand, so a
// benchmark can measure prompt-lookup and draft speculation on text that repeats, at any size
// (the other weights are small noise that costs the same bandwidth and changes nothing).
//
// The residual stream holds, per token t, a bias dimension, a matching code k_t and an output
// code u_t (random unit vectors). Layer 0's heads 0, 1 and 2 attend by position alone to the
// tokens one, two and three back (the fast rotary pairs make their scores peak there) and write
// those tokens' k codes into slots P1, P2 and P3. Layer 1's head 0 matches (k_t, P1, P2) of the
// current token against (P1, P2, P3) of every earlier one in the slow rotary pairs (which barely
// turn over the context), weighing the three 4, 2 and 1, and copies the best match's u code into
// slot C; the classifier reads only C. So the greedy next token is the one that followed the
// longest earlier occurrence of the last tokens (up to three): what prompt lookup guesses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvserve {

struct SyntheticSpec;

// The rope.freq_base of a copier: so large that most rotary pairs turn by less than a hundredth
// of a radian over the context (the content match lives there) while the first few still turn
// fast enough to locate the previous tokens.
inline constexpr float kCopierRopeBase = 1e30f;
// The relative size of the noise in every weight the design does not set.
inline constexpr float kCopierNoise = 0.05f;

// Throws std::invalid_argument naming what a copier needs that the spec lacks (llama, an untied
// classifier, head dimension of about 128, three heads, two layers, width for the slots).
void validate_copier(const SyntheticSpec& spec);

// Sets the designed entries of tensor `name` (shape `dims`, GGUF order: dims[0] varies fastest);
// the rest of `values` is left as it is.
void copier_weights(const SyntheticSpec& spec, const std::string& name, const std::vector<uint64_t>& dims,
                    std::vector<float>& values);

// The token that the copier's greedy decoding predicts after `tokens` (the rule its weights
// implement, written out directly: each earlier position scores 4, 2 and 1 for the tokens one,
// two and three before it equal to the last, second-last and third-last), or -1 when the last
// token never occurred before or the best-scoring positions were followed by different tokens
// (the head then averages their codes): the naive reference its tests compare the model with.
int32_t copier_next_token(const std::vector<int32_t>& tokens);

}  // namespace kvserve
