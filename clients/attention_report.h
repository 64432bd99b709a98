// The InspectAttention report as one self-contained HTML file: no network, no external scripts.
// A grid of per-head heat maps (tokens on the axes) with each head's scores and label.
#pragma once

#include <string>

#include "kvserve.pb.h"

namespace kvserve {

std::string attention_report_html(const v1::InspectAttentionResponse& response, const std::string& title);

}  // namespace kvserve
