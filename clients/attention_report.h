// The head atlas: InspectAttention's result (and, when measured, HeadImportance's and the model's
// KV what-if) as one self-contained HTML page, with no network and no external scripts. A layer x
// head overview coloured by role and shaded by importance, one head's map drawn on a canvas from
// 8-bit weights, hover read-outs, a colour scale, a token strip, and the roles, pruning and KV
// answers as tables. Everything but the maps reads without JavaScript.
#pragma once

#include <string>

#include "kvserve.pb.h"

namespace kvserve {

struct AttentionReportInput {
  const v1::InspectAttentionResponse* attention = nullptr;  // required; its matrices drawn when present
  const v1::HeadImportanceResponse* importance = nullptr;   // null: importance not measured
  const v1::GetModelInfoResponse* model = nullptr;          // null: no model line, no KV what-if
  std::string title;
};

std::string attention_report_html(const AttentionReportInput& input);

}  // namespace kvserve
