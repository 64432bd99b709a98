#include "speculative/draft_model.h"

#include <algorithm>
#include <limits>

#include "common/config_error.h"
#include "kernels/attention_args.h"
#include "kv_cache/kv_layout.h"

namespace kvserve {
namespace {

std::string field(const std::string& path) { return "speculative.draft_model: " + path; }

// The draft must spell every token as the target does: its proposals are token ids.
void check_vocabulary(const std::string& path, const Tokenizer& draft, const Tokenizer& target) {
  if (draft.vocab_size() != target.vocab_size())
    throw ConfigError(field(path) + " has " + std::to_string(draft.vocab_size()) + " tokens and the model " +
                      std::to_string(target.vocab_size()) + ": a draft model must share the model's vocabulary");
  for (int32_t t = 0; t < target.vocab_size(); ++t)
    if (draft.token_text(t) != target.token_text(t))
      throw ConfigError(field(path) + ": token " + std::to_string(t) + " is \"" + draft.token_text(t) +
                        "\" there and \"" + target.token_text(t) +
                        "\" in the model: a draft model must share the model's vocabulary");
}

int32_t argmax(const float* logits, int32_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

}  // namespace

DraftModelProposer::DraftModelProposer(const DraftModelOptions& o, const Tokenizer& target)
    : block_size_(o.block_size), max_rows_(std::max(1, o.max_rows)) {
  try {
    file_ = std::make_unique<GgufFile>(o.path);
    check_vocabulary(o.path, Tokenizer(*file_), target);
    model_ = load_model(*file_, o.load);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(field(o.path) + ": " + e.what());
  }
  const ModelHparams& hp = model_->hparams();
  if (hp.n_vocab != target.vocab_size())
    throw ConfigError(field(o.path) + ": its output has " + std::to_string(hp.n_vocab) + " rows for a vocabulary of " +
                      std::to_string(target.vocab_size()) + " tokens");
  position_limit_ = hp.max_positions > 0 ? hp.max_positions : std::numeric_limits<int64_t>::max();
  KvShape shape = model_->kv_shape();
  shape.element_bytes = o.element_bytes;
  if (shape.q8() && int64_t{shape.n_kv_heads} * shape.head_dim % kKvQ8Group != 0) shape.element_bytes = 2;
  // Every layer keeps every position (no block release behind windows): a draft's cache is small.
  const KvLayout layout = KvLayout::single(hp.n_layer);
  const int64_t block_bytes = shape.bytes_per_token() * block_size_;
  const int64_t blocks = std::min<int64_t>(o.cache_bytes / block_bytes, int64_t{1} << 30);
  if (blocks < 1)
    throw ConfigError("speculative.draft_cache_share: the draft's " + std::to_string(o.cache_bytes) +
                      " bytes of cache hold no block of " + std::to_string(block_bytes) + " bytes");
  kv_ = std::make_unique<KvStorage>(shape, block_size_, static_cast<int32_t>(blocks), layout);
  alloc_ = std::make_unique<BlockAllocator>(kv_->num_blocks());
  model_->warm_up(max_rows_);
}

void DraftModelProposer::forget(uint64_t id) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  it->second.table.release_all(*alloc_);
  states_.erase(it);
}

bool DraftModelProposer::make_room(State& state, int64_t n) {
  while (!state.table.grow_to(n, *alloc_)) {
    auto victim = states_.end();
    for (auto it = states_.begin(); it != states_.end(); ++it)
      if (it->second.used != calls_ && (victim == states_.end() || it->second.used < victim->second.used)) victim = it;
    if (victim == states_.end()) return false;
    victim->second.table.release_all(*alloc_);
    states_.erase(victim);
  }
  return true;
}

void DraftModelProposer::propose(std::span<const ProposalRequest> requests) {
  ++calls_;
  struct Active {
    const ProposalRequest* request;
    State* state;
  };
  std::vector<Active> active;
  for (const ProposalRequest& r : requests) {
    r.out->clear();
    const int64_t n = static_cast<int64_t>(r.tokens.size());
    if (n == 0 || r.k < 1 || n + r.k - 1 > position_limit_) continue;
    State& st = states_.try_emplace(r.id, block_size_).first->second;
    st.used = calls_;
    // What the draft ran that the sequence still has stands (the rejected proposals do not);
    // the last token runs again at least, for the logits that propose the first token.
    const int64_t same = std::mismatch(st.fed.begin(), st.fed.end(), r.tokens.begin(), r.tokens.end()).first - st.fed.begin();
    const int64_t keep = std::min(same, n - 1);
    st.fed.resize(keep);
    st.table.truncate(keep, *alloc_);
    // The sequence and the k - 1 proposals run back through the draft.
    if (!make_room(st, n + r.k - 1)) {
      forget(r.id);
      continue;
    }
    active.push_back({&r, &st});
  }
  // Catch-up passes: each sequence's unseen tokens, max_rows at a time; the pass that runs a
  // sequence's last token proposes its first.
  std::vector<Rows> rows;
  for (;;) {
    rows.clear();
    int64_t budget = max_rows_;
    for (const Active& a : active) {
      const int64_t from = static_cast<int64_t>(a.state->fed.size());
      const int64_t n = static_cast<int64_t>(a.request->tokens.size());
      const int64_t take = std::min(n - from, budget);
      if (take <= 0) continue;
      budget -= take;
      rows.push_back({a.state, a.request->out, from,
                      std::vector<int32_t>(a.request->tokens.begin() + from, a.request->tokens.begin() + from + take),
                      from + take == n});
    }
    if (rows.empty()) break;
    run(rows);
  }
  // Then one token per pass: each proposal runs to propose the next, until each has its k.
  for (int32_t j = 1;; ++j) {
    rows.clear();
    for (const Active& a : active)
      if (j < a.request->k && static_cast<int32_t>(a.request->out->size()) == j)
        rows.push_back({a.state, a.request->out, static_cast<int64_t>(a.state->fed.size()), {a.request->out->back()}, true});
    if (rows.empty()) break;
    run(rows);
  }
}

void DraftModelProposer::run(std::vector<Rows>& rows) {
  batch_.clear();
  const int64_t n_seqs = static_cast<int64_t>(rows.size());
  int32_t max_blocks = 0;
  for (const Rows& r : rows) max_blocks = std::max<int32_t>(max_blocks, static_cast<int32_t>(r.state->table.blocks().size()));
  batch_.max_blocks = max_blocks;
  batch_.block_tables.assign(n_seqs * max_blocks, 0);
  for (int64_t i = 0; i < n_seqs; ++i) {
    Rows& r = rows[i];
    const std::vector<int32_t>& blocks = r.state->table.blocks();
    std::copy(blocks.begin(), blocks.end(), batch_.block_tables.begin() + i * max_blocks);
    for (size_t j = 0; j < r.tokens.size(); ++j) {
      const int64_t p = r.from + static_cast<int64_t>(j);
      batch_.tokens.push_back(r.tokens[j]);
      batch_.positions.push_back(static_cast<int32_t>(p));
      batch_.token_seq.push_back(static_cast<int32_t>(i));
      batch_.slots.push_back(r.state->table.slot(p));
    }
    if (r.sample) batch_.logit_rows.push_back(static_cast<int32_t>(batch_.tokens.size()) - 1);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const float* logits = model_->forward(batch_, *kv_);
  if (batch_.size() == n_seqs) {  // one token each: the passes a proposal's length buys
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pass_seconds_ = pass_seconds_ > 0 ? 0.9 * pass_seconds_ + 0.1 * t : t;
  }
  const int32_t V = model_->hparams().n_vocab;
  for (Rows& r : rows) {
    r.state->fed.insert(r.state->fed.end(), r.tokens.begin(), r.tokens.end());
    if (!r.sample) continue;
    r.out->push_back(argmax(logits, V));
    logits += V;
  }
}

}  // namespace kvserve
