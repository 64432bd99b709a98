#include "kv_cache/kv_what_if.h"

namespace kvserve {

std::vector<KvVariant> kv_what_if(const KvShapeFacts& f) {
  auto make = [&](std::string name, int32_t n_kv, int64_t bpt) {
    KvVariant v;
    v.name = std::move(name);
    v.n_kv_heads = n_kv;
    v.bytes_per_token = bpt;
    v.token_capacity = f.budget_bytes / (bpt * f.block_size) * f.block_size;
    v.max_concurrency = static_cast<double>(v.token_capacity) / (f.tokens_held > 0 ? f.tokens_held : f.max_model_len);
    return v;
  };
  // Values per token to bytes: 34 per 32 (rounded up to whole blocks of 32) in a q8_0 cache.
  auto bytes = [&](int64_t values) { return f.q8 ? (values + 31) / 32 * 34 : values * f.element_bytes; };
  const int64_t v_dim = f.v_head_dim > 0 ? f.v_head_dim : f.head_dim;
  auto gqa = [&](int32_t n_kv) {
    return f.n_layer * (bytes(int64_t{n_kv} * f.head_dim) + bytes(int64_t{n_kv} * v_dim));
  };
  std::vector<KvVariant> out;
  out.push_back(make("as is", f.mla_latent > 0 && f.as_is_bytes_per_token > 0 ? 0 : f.n_head_kv,
                     f.as_is_bytes_per_token > 0 ? f.as_is_bytes_per_token : gqa(f.n_head_kv)));
  out.push_back(make("MHA", f.n_head, gqa(f.n_head)));
  // Only groupings the model's heads allow: g KV heads must divide the query heads and be fewer.
  for (int32_t g : {2, 4, 8})
    if (g < f.n_head && f.n_head % g == 0) out.push_back(make("GQA-" + std::to_string(g), g, gqa(g)));
  out.push_back(make("MQA", 1, gqa(1)));
  const int64_t latent = f.mla_latent > 0 ? f.mla_latent : 4 * int64_t{f.head_dim};
  out.push_back(make("MLA", 0, bytes(latent + f.mla_rope) * f.n_layer));
  return out;
}

}  // namespace kvserve
