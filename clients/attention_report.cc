#include "attention_report.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "attention_report_page.h"

namespace kvserve {
namespace {

struct Role {
  const char* name;
  const char* letter;
  const char* rule;
};

// In the order the labels are tested (HeadAttention's comment in kvserve.proto); the first that
// holds names the head.
const Role kRoles[] = {
    {"induction", "I", "induction score &ge; 0.3: on the probe, mean weight from a token's second occurrence to the token that followed its first"},
    {"previous-token", "P", "previous-token score &ge; 0.5: mean weight on the token just before (rows t &ge; 2)"},
    {"sink", "S", "sink score &ge; 0.5: mean weight on the first position (rows t &ge; 2)"},
    {"local", "L", "local score &ge; 0.7: mean weight on the last four positions, t-3..t"},
    {"diffuse", "D", "entropy &ge; 0.8: mean row entropy over log(t+1), 1 for uniform attention"},
    {"mixed", "M", "none of the above"},
};

const Role& role_of(const std::string& label) {
  for (const Role& r : kRoles)
    if (label == r.name) return r;
  return kRoles[5];
}

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += ',';
    out += s[i];
  }
  return out;
}

std::string base64(const std::vector<unsigned char>& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const uint32_t b = static_cast<uint32_t>(in[i]) << 16 | (i + 1 < in.size() ? in[i + 1] << 8 : 0) |
                       (i + 2 < in.size() ? in[i + 2] : 0);
    out += kAlphabet[b >> 18 & 63];
    out += kAlphabet[b >> 12 & 63];
    out += i + 1 < in.size() ? kAlphabet[b >> 6 & 63] : '=';
    out += i + 2 < in.size() ? kAlphabet[b & 63] : '=';
  }
  return out;
}

std::vector<unsigned char> deflate(const std::vector<unsigned char>& in) {
  uLongf size = compressBound(in.size());
  std::vector<unsigned char> out(size);
  if (compress2(out.data(), &size, in.data(), in.size(), Z_BEST_COMPRESSION) != Z_OK)
    throw std::runtime_error("cannot compress the attention weights");
  out.resize(size);
  return out;
}

// Every head's lower triangle, row by row, one byte a weight (byte / 255), heads in response order.
std::vector<unsigned char> weights_u8(const v1::InspectAttentionResponse& r) {
  const size_t n = static_cast<size_t>(r.tokens_size()), tri = n * (n + 1) / 2;
  std::vector<unsigned char> out;
  out.reserve(tri * r.heads_size());
  for (const auto& h : r.heads()) {
    if (r.matrices() == "uint8" && h.weights_u8().size() == tri) {
      out.insert(out.end(), h.weights_u8().begin(), h.weights_u8().end());
    } else if (static_cast<size_t>(h.weights_size()) == tri) {
      for (float w : h.weights()) out.push_back(static_cast<unsigned char>(std::lround(std::clamp(w, 0.0f, 1.0f) * 255.0f)));
    } else {
      return {};
    }
  }
  return out;
}

// Importance shading: full colour for the head whose removal costs most, pale for heads that cost
// nothing (or help when removed); square root so that mid-ranked heads stay distinguishable.
double shade(double drop, double max_drop) {
  if (max_drop <= 0) return 0.18;
  return 0.18 + 0.82 * std::sqrt(std::clamp(drop / max_drop, 0.0, 1.0));
}

void header(std::ostringstream& o, const AttentionReportInput& in) {
  const auto& a = *in.attention;
  o << "<h1>" << esc(in.title) << "</h1>\n<p class=\"sub\">";
  if (in.model) {
    const auto& m = *in.model;
    o << "<b>" << esc(m.name().empty() ? m.architecture() : m.name()) << "</b> (" << esc(m.architecture()) << ", "
      << esc(m.weight_type()) << "): ";
  }
  o << a.n_layers() << " layers &times; " << a.n_heads() << " heads = " << a.heads_size() << " heads";
  if (in.model && in.model->n_kv_heads() != in.model->n_heads())
    o << " sharing " << in.model->n_kv_heads() << " K/V heads a layer";
  o << "; " << a.tokens_size() << " tokens.</p>\n";
}

void overview(std::ostringstream& o, const AttentionReportInput& in, const std::map<std::pair<int, int>, double>& drop,
              double max_drop) {
  const auto& a = *in.attention;
  std::map<std::string, int> counts;
  for (const auto& h : a.heads()) ++counts[role_of(h.label()).name];
  o << "<section id=\"overview\"><h2>All heads: one row per layer</h2>\n<p class=\"how\">Each square is one head, "
       "coloured by its role (the rules are under <a href=\"#roles\">Head roles</a>) and marked with its letter. ";
  if (in.importance)
    o << "Shading is importance: full colour for the head whose removal costs most (drop " << fmt(max_drop, 4)
      << " nats/token), pale for heads whose removal costs nothing; opacity = 0.18 + 0.82&middot;&radic;(drop / "
         "largest drop). ";
  else
    o << "Importance was not measured (<code>kvserve-cli inspect ... --importance</code> measures it), so every head "
         "has the same shade. ";
  o << "Click a head to open its map below.</p>\n<div class=\"legend\">";
  for (const Role& r : kRoles)
    o << "<span><span class=\"sw role-" << r.name << "\" style=\"background:rgb(var(--rgb))\"></span>" << r.letter
      << " " << r.name << " (" << counts[r.name] << ")</span>";
  o << "</div>\n<div class=\"atlas\" style=\"--heads:" << a.n_heads() << "\">\n<div class=\"layer\"><span class=\"lname\">head</span>";
  const int label_every = a.n_heads() <= 32 ? 1 : a.n_heads() <= 64 ? 4 : 8;
  for (int h = 0; h < a.n_heads(); ++h)
    o << "<span class=\"hnum\">" << (h % label_every == 0 ? std::to_string(h) : "") << "</span>";
  o << "</div>\n";
  int layer = -1;
  for (const auto& h : a.heads()) {
    if (h.layer() != layer) {
      if (layer >= 0) o << "</div>\n";
      layer = h.layer();
      o << "<div class=\"layer\"><span class=\"lname\">layer " << layer << "</span>";
    }
    const Role& r = role_of(h.label());
    const auto d = drop.find({h.layer(), h.head()});
    const double imp = in.importance ? shade(d == drop.end() ? 0.0 : d->second, max_drop) : 0.85;
    o << "<a class=\"cell role-" << r.name << "\" href=\"#h-" << h.layer() << "-" << h.head() << "\" style=\"--imp:"
      << fmt(imp, 2) << "\" title=\"layer " << h.layer() << " head " << h.head() << ": " << r.name;
    if (d != drop.end()) o << ", drop " << fmt(d->second, 4) << " nats/token";
    o << "\">" << r.letter << "</a>";
  }
  if (layer >= 0) o << "</div>\n";
  o << "</div></section>\n";
}

void head_map(std::ostringstream& o, bool have_weights) {
  o << "<section id=\"head\"><h2 id=\"head-title\">Head map</h2><p id=\"head-scores\" class=\"how\"></p>\n";
  if (!have_weights) {
    o << "<p>The server sent no attention matrices, so there are no maps.</p></section>\n";
    return;
  }
  o << "<noscript><p class=\"noscript\">The maps are drawn by this page's script; everything else on the page reads "
       "without it.</p></noscript>\n<div class=\"panel\"><div class=\"mapbox\"><canvas id=\"map\" width=\"10\" "
       "height=\"10\"></canvas></div>\n<div class=\"side\"><div id=\"readout\"></div>\n<canvas id=\"scale\" "
       "width=\"340\" height=\"34\"></canvas>\n<p class=\"how\">Row = query token, column = key token: the weight the "
       "query gives the key (each row sums to 1). Colour = &radic;weight from white (0) to dark blue (1), on the scale "
       "above; the square root keeps weights of 0.01-0.1 visible. Grey above the diagonal: a causal head cannot see "
       "later tokens. Weights are stored to the nearest 1/255. The red frame marks the query row the token strip "
       "shows.</p>\n<p class=\"how\">Token strip: the query token framed in red, every earlier token shaded by the "
       "weight the query gives it, later tokens grey. Hover a token to make it the query.</p>\n<div class=\"strip\" "
       "id=\"strip\"></div></div></div></section>\n";
}

void roles(std::ostringstream& o, const v1::InspectAttentionResponse& a) {
  o << "<section id=\"roles\"><h2>Head roles</h2>\n<p class=\"how\">Measured on this page's text: each score is a mean "
       "over the rows of the head's attention above; the induction score comes from a second prompt the server runs, "
       "BOS then "
    << a.induction_period()
    << " random tokens twice, where a head that copies looks from a token's second occurrence to what followed its "
       "first. The first rule that holds names the head.</p>\n<table><tr><th>role</th><th>rule</th><th "
       "class=\"num\">heads</th><th>which (layer.head)</th></tr>\n";
  for (const Role& r : kRoles) {
    std::string which;
    int count = 0;
    for (const auto& h : a.heads())
      if (&role_of(h.label()) == &r) {
        which += (count++ ? ", " : "") + std::to_string(h.layer()) + "." + std::to_string(h.head());
      }
    o << "<tr><td style=\"white-space:nowrap\"><span class=\"sw role-" << r.name
      << "\" style=\"background:rgb(var(--rgb))\"></span>" << r.name << "</td><td>" << r.rule
      << "</td><td class=\"num\">" << count << "</td><td>" << (count ? which : "&ndash;") << "</td></tr>\n";
  }
  o << "</table></section>\n";
}

void importance(std::ostringstream& o, const v1::HeadImportanceResponse* imp) {
  o << "<section id=\"importance\"><h2>Which heads could go</h2>\n";
  if (!imp) {
    o << "<p>Not measured. <code>kvserve-cli inspect ... --importance</code> scores the same text once as it is and "
         "once per head with that head removed, and finds the heads that can go together.</p></section>\n";
    return;
  }
  o << "<p class=\"how\">Measured by scoring this text (" << imp->n_tokens()
    << " predicted tokens) once as it is (mean log-likelihood " << fmt(imp->baseline_mean_logprob(), 4)
    << " nats/token) and once per head with that head's output zeroed before the output projection; a head's drop is "
       "how much the mean log-likelihood falls without it. The removable set is the longest run of least important "
       "heads whose drop, measured with all of them zeroed at once, stays within the budget.</p>\n";
  o << "<p><b>" << imp->prunable_size() << " of " << imp->heads_size() << " heads</b> can be removed together within "
    << fmt(imp->loss_budget(), 4) << " nats/token: measured drop " << fmt(imp->prunable_measured_drop(), 4)
    << " (their single drops sum to " << fmt(imp->prunable_estimated_drop(), 4) << ")";
  if (imp->prunable_size() > 0) {
    o << ": ";
    for (int i = 0; i < imp->prunable_size(); ++i)
      o << (i ? ", " : "") << "<a href=\"#h-" << imp->prunable(i).layer() << "-" << imp->prunable(i).head() << "\">"
        << imp->prunable(i).layer() << "." << imp->prunable(i).head() << "</a>";
  }
  o << ".</p>\n<table><tr><th class=\"num\">rank</th><th>head (layer.head)</th><th class=\"num\">drop, "
       "nats/token</th></tr>\n";
  const int shown = std::min(imp->heads_size(), 10);
  for (int i = 0; i < shown; ++i) {
    const auto& h = imp->heads(i);
    o << "<tr><td class=\"num\">" << i + 1 << "</td><td><a href=\"#h-" << h.layer() << "-" << h.head() << "\">"
      << h.layer() << "." << h.head() << "</a></td><td class=\"num\">" << fmt(h.drop(), 4) << "</td></tr>\n";
  }
  o << "</table><p class=\"how\">The " << shown << " most important of " << imp->heads_size()
    << "; every head's drop is in its square's tooltip and above its map.</p></section>\n";
}

void kv_what_if(std::ostringstream& o, const v1::GetModelInfoResponse* m) {
  if (!m || m->kv_what_if_size() == 0) return;
  const auto& kv = m->kv_bytes_per_token();
  const std::string element = kv.has_element_size() ? kv.element_size() : std::to_string(kv.element_bytes());
  o << "<section id=\"kv\"><h2>What the KV cache would cost with other attention layouts</h2>\n<p class=\"how\">"
       "Computed from this model's shape and this server's cache ("
    << with_commas(m->kv_cache_bytes() / 1048576) << " MiB, " << element
    << " bytes a value): bytes per token = 2 &middot; " << kv.n_layers() << " layers &middot; K/V heads &middot; "
    << kv.head_dim() << " head size &middot; " << element
    << "; MLA keeps one latent of 4 &middot; head size + 64 values a layer. Concurrency counts requests of "
    << m->max_model_len() << " tokens.</p>\n<table><tr><th>layout</th><th class=\"num\">K/V heads</th><th "
       "class=\"num\">bytes / token</th><th class=\"num\">tokens in the cache</th><th class=\"num\">concurrent "
       "requests</th></tr>\n";
  for (const auto& v : m->kv_what_if())
    o << "<tr><td>" << esc(v.name()) << "</td><td class=\"num\">" << (v.n_kv_heads() ? std::to_string(v.n_kv_heads()) : "latent")
      << "</td><td class=\"num\">" << with_commas(v.bytes_per_token()) << "</td><td class=\"num\">"
      << with_commas(v.token_capacity()) << "</td><td class=\"num\">" << fmt(v.max_concurrency(), 2) << "</td></tr>\n";
  o << "</table></section>\n";
}

}  // namespace

std::string attention_report_html(const AttentionReportInput& in) {
  if (!in.attention) throw std::invalid_argument("attention_report_html: no InspectAttention response");
  const auto& a = *in.attention;
  std::map<std::pair<int, int>, double> drop;
  std::map<std::pair<int, int>, int> rank;
  double max_drop = 0.0;
  if (in.importance)
    for (int i = 0; i < in.importance->heads_size(); ++i) {
      const auto& h = in.importance->heads(i);
      drop[{h.layer(), h.head()}] = h.drop();
      rank[{h.layer(), h.head()}] = i + 1;
      max_drop = std::max(max_drop, h.drop());
    }

  const std::vector<unsigned char> u8 = weights_u8(a);
  nlohmann::json data;
  data["tokens"] = nlohmann::json::array();
  for (const auto& t : a.tokens()) data["tokens"].push_back(t);
  data["n_heads"] = a.n_heads();
  data["heads"] = nlohmann::json::array();
  int first = 0;
  for (int i = 0; i < a.heads_size(); ++i) {
    const auto& h = a.heads(i);
    nlohmann::json j = {{"layer", h.layer()},          {"head", h.head()},   {"label", role_of(h.label()).name},
                        {"prev", h.previous_token_score()}, {"sink", h.sink_score()}, {"local", h.local_score()},
                        {"entropy", h.entropy()},      {"induction", h.induction_score()}};
    const auto d = drop.find({h.layer(), h.head()});
    if (d != drop.end()) {
      j["drop"] = d->second;
      j["rank"] = rank[{h.layer(), h.head()}];
      if (rank[{h.layer(), h.head()}] == 1) first = i;  // open on the most important head
    }
    data["heads"].push_back(std::move(j));
  }
  data["first"] = first;
  data["encoding"] = "deflate";
  data["weights"] = u8.empty() ? "" : base64(deflate(u8));
  // Token text may hold anything, "</script>" included: keep the JSON inert inside the page.
  std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"</", "<\\/"}, {"<!", "<\\u0021"}})
    for (size_t pos = json.find(from); pos != std::string::npos; pos = json.find(from, pos + to.size()))
      json.replace(pos, from.size(), to);

  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" "
       "content=\"width=device-width, initial-scale=1\">\n<title>"
    << esc(in.title) << "</title>\n<style>" << report::kStyle << "</style></head>\n<body data-heads=\""
    << a.heads_size() << "\" data-tokens=\"" << a.tokens_size() << "\">\n";
  header(o, in);
  overview(o, in, drop, max_drop);
  head_map(o, !u8.empty());
  roles(o, a);
  importance(o, in.importance);
  kv_what_if(o, in.model);
  o << "<script type=\"application/json\" id=\"atlas-data\">" << json << "</script>\n";
  if (!u8.empty()) o << "<script>" << report::kScript << "</script>\n";
  o << "</body></html>\n";
  return o.str();
}

}  // namespace kvserve
