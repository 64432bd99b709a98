// A small Jinja interpreter for chat templates: what the templates models ship use (the list is
// in ../shared/chat-templates/README.md), rendered as Hugging Face transformers renders them:
// trim_blocks and lstrip_blocks, loop controls, one trailing newline dropped, a `tojson` that is
// Python's json.dumps, and the globals raise_exception, strftime_now, namespace and range.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "text/jinja/jinja_value.h"

namespace kvserve::jinja {

struct Node;

class Template {
 public:
  // JinjaError with the line of a syntax error.
  explicit Template(const std::string& source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // context: a dict of the template's variables. now: what strftime_now formats (UTC).
  // JinjaError for raise_exception (its message) and for what cannot be evaluated.
  std::string render(const Value& context, std::time_t now) const;

 private:
  std::vector<Node> nodes_;
};

}  // namespace kvserve::jinja
