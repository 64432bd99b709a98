#include "attention_report.h"

#include <nlohmann/json.hpp>

namespace kvserve {
namespace {

// The page's script draws every canvas from the embedded data, then marks it with the number of
// cells it painted (data-painted), which the browser test reads back.
constexpr const char* kPage = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>@TITLE@</title>
<style>
body { font: 13px system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; }
.rules { color: #555; margin: 0 0 12px; max-width: 70em; }
.grid { display: grid; grid-template-columns: repeat(@COLS@, max-content); gap: 14px; }
.head { border: 1px solid #ddd; padding: 6px; border-radius: 4px; }
.head h2 { font-size: 13px; margin: 0 0 2px; }
.label { display: inline-block; padding: 0 6px; border-radius: 8px; background: #eee; }
.label.previous-token { background: #cde8ff; } .label.sink { background: #ffe1c2; }
.label.induction { background: #d8f5c8; } .label.local { background: #efd9ff; }
.scores { color: #555; font-size: 11px; margin-bottom: 4px; }
</style></head><body>
<h1>@TITLE@</h1>
<p class="rules">Each map is one head's causal attention: row = query token, column = key token, darker =
more weight. Labels, first rule that holds: induction score &ge; 0.3 (on a repeated random sequence),
previous-token &ge; 0.5, sink (weight on the first position) &ge; 0.5, local (last 4 positions) &ge; 0.7,
diffuse (normalised entropy &ge; 0.8), otherwise mixed.</p>
<div class="grid" id="grid"></div>
<script type="application/json" id="data">@DATA@</script>
<script>
(function () {
  const data = JSON.parse(document.getElementById('data').textContent);
  const n = data.tokens.length;
  const cell = Math.max(2, Math.min(14, Math.floor(360 / n)));
  const labelled = cell >= 8;
  const margin = labelled ? 70 : 4;
  const grid = document.getElementById('grid');
  for (const h of data.heads) {
    const box = document.createElement('div');
    box.className = 'head';
    const title = document.createElement('h2');
    title.textContent = 'layer ' + h.layer + ' head ' + h.head + ' ';
    const tag = document.createElement('span');
    tag.className = 'label ' + h.label;
    tag.textContent = h.label;
    title.appendChild(tag);
    box.appendChild(title);
    const sc = document.createElement('div');
    sc.className = 'scores';
    sc.textContent = 'prev ' + h.prev.toFixed(2) + ' · sink ' + h.sink.toFixed(2) + ' · local ' +
        h.local.toFixed(2) + ' · entropy ' + h.entropy.toFixed(2) + ' · induction ' + h.induction.toFixed(2);
    box.appendChild(sc);
    const canvas = document.createElement('canvas');
    canvas.className = 'heatmap';
    canvas.dataset.layer = h.layer;
    canvas.dataset.head = h.head;
    canvas.width = margin + n * cell;
    canvas.height = margin + n * cell;
    box.appendChild(canvas);
    grid.appendChild(box);
    const g = canvas.getContext('2d');
    g.fillStyle = '#fff';
    g.fillRect(0, 0, canvas.width, canvas.height);
    let painted = 0, k = 0;
    for (let r = 0; r < n; ++r) {
      for (let c = 0; c <= r; ++c, ++k) {
        const w = h.weights.length ? h.weights[k] : 0;
        const shade = Math.round(255 * (1 - Math.sqrt(Math.max(0, Math.min(1, w)))));
        g.fillStyle = 'rgb(' + shade + ',' + shade + ',255)';
        g.fillRect(margin + c * cell, margin + r * cell, cell, cell);
        ++painted;
      }
    }
    if (labelled) {
      g.fillStyle = '#333';
      g.font = Math.min(11, cell) + 'px monospace';
      for (let i = 0; i < n; ++i) {
        const t = data.tokens[i].slice(0, 8);
        g.textAlign = 'right';
        g.fillText(t, margin - 3, margin + i * cell + cell - 1);
        g.save();
        g.translate(margin + i * cell + cell - 1, margin - 3);
        g.rotate(-Math.PI / 2);
        g.textAlign = 'left';
        g.fillText(t, 0, 0);
        g.restore();
      }
    }
    canvas.dataset.painted = painted;
  }
  document.body.dataset.heads = data.heads.length;
})();
</script></body></html>
)HTML";

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

std::string html_escape(const std::string& s) {
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

}  // namespace

std::string attention_report_html(const v1::InspectAttentionResponse& r, const std::string& title) {
  nlohmann::json data;
  data["tokens"] = nlohmann::json::array();
  for (const auto& t : r.tokens()) data["tokens"].push_back(t);
  data["heads"] = nlohmann::json::array();
  for (const auto& h : r.heads()) {
    data["heads"].push_back({{"layer", h.layer()},
                             {"head", h.head()},
                             {"label", h.label()},
                             {"prev", h.previous_token_score()},
                             {"sink", h.sink_score()},
                             {"local", h.local_score()},
                             {"entropy", h.entropy()},
                             {"induction", h.induction_score()},
                             {"weights", std::vector<float>(h.weights().begin(), h.weights().end())}});
  }
  // Token text may hold anything, "</script>" included: keep the JSON inert inside the page.
  std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  replace_all(json, "</", "<\\/");
  replace_all(json, "<!", "<\\u0021");
  std::string page = kPage;
  replace_all(page, "@TITLE@", html_escape(title));
  replace_all(page, "@COLS@", std::to_string(std::max(1, std::min(r.n_heads(), 4))));
  replace_all(page, "@DATA@", json);
  return page;
}

}  // namespace kvserve
