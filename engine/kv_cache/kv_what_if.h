// What the KV cache would cost if the loaded model used another attention layout, under the
// same KV budget and context: the model as it is, classic MHA (n_kv = n_head), GQA with 2, 4 and
// 8 KV heads where that many divide the query heads and are fewer, MQA (one KV head), and MLA (a compressed latent of width d_c plus a decoupled
// rotary part d_rope per layer, as in DeepSeek-V2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvserve {

struct KvVariant {
  std::string name;         // "as is", "MHA", "GQA-2", "GQA-4", "GQA-8", "MQA", "MLA"
  int32_t n_kv_heads = 0;   // 0 for MLA
  int64_t bytes_per_token = 0;
  int64_t token_capacity = 0;    // tokens the budget holds, in whole blocks
  double max_concurrency = 0;    // full-length requests at once
};

struct KvShapeFacts {
  int32_t n_layer, n_head, n_head_kv, head_dim, element_bytes, block_size, max_model_len;
  int64_t budget_bytes;
  int32_t mla_latent = 0;  // d_c; 0 = 4 · head_dim
  int32_t mla_rope = 64;   // d_rope
  int32_t v_head_dim = 0;  // a head's V width where it differs from head_dim (K's); 0: head_dim
  int64_t as_is_bytes_per_token = 0;  // the cache as it is, where known (a latent cache); 0: from the heads
  bool q8 = false;         // q8_0 cache: 34 bytes per 32 values, element_bytes ignored
  // Positions of every layer one full-length request holds at once: max_model_len, or fewer when
  // windowed layers release the blocks behind their window (0: max_model_len).
  int64_t tokens_held = 0;
};

// bytes/token = L · n_kv · (d_k + d_v) · bytes for the first five (2 · L · n_kv · d_h when K and
// V heads are alike); (d_c + d_rope) · L · bytes for MLA.
std::vector<KvVariant> kv_what_if(const KvShapeFacts& f);

}  // namespace kvserve
