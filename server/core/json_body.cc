#include "core/json_body.h"

#include <cctype>
#include <cstdio>
#include <vector>

#include "core/log_text.h"
#include "text/utf8.h"

namespace kvserve {
namespace {

using nlohmann::json;

// A member name as it stands in an error's path: letters, digits, '_' and '-' as they are, any
// other byte as \xHH, cut at 60 bytes with "...", so the path has no space or colon of its own
// and "path: reason" stays unambiguous.
std::string path_key(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    if (i == 60) return out + "...";
    const auto c = static_cast<unsigned char>(key[i]);
    if (std::isalnum(c) || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

// The DOM builder, with the path to the current value kept beside it so that errors name it.
class BodySax {
 public:
  explicit BodySax(json& out) : dom_(out, false) {}

  bool null() { return value() && dom_.null(); }
  bool boolean(bool v) { return value() && dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return value() && dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value() && dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return value() && dom_.number_float(v, s); }
  bool string(json::string_t& v) { return value() && dom_.string(v); }
  bool binary(json::binary_t& v) { return value() && dom_.binary(v); }
  bool start_object(std::size_t n) { return open(false) && dom_.start_object(n); }
  bool key(json::string_t& k) {
    frames_.back().key = k;
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return open(true) && dom_.start_array(n); }
  bool end_array() {
    frames_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t, const std::string& last_token, const nlohmann::detail::exception& e) {
    const std::string what = e.what();
    if (e.id == 406) {  // a number beyond a double's range
      error_ = where() + ": the number " + log_escape(last_token, 40) + " is out of range";
    } else if (what.find("UTF-8") != std::string::npos || what.find("UTF-16") != std::string::npos) {
      error_ = where() + ": not valid UTF-8";
    } else {
      // "[json.exception.parse_error.101] parse error at line 1, column 9: ..." without the tag;
      // the parser quotes what it read, which may be any bytes.
      const size_t tag = what.find("] ");
      error_ = "body: not valid JSON: " + log_escape(tag == std::string::npos ? what : what.substr(tag + 2), 200);
    }
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  struct Frame {
    bool array = false;
    int64_t index = -1;  // arrays: the element being read
    std::string key;     // objects: the member being read
  };

  // Called before every value: in an array, it is the next element.
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool open(bool array) {
    value();
    if (static_cast<int>(frames_.size()) >= kMaxJsonDepth) {
      error_ = where() + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      return false;
    }
    frames_.push_back({array, -1, {}});
    return true;
  }
  // "messages[0].content": the path to the value being read.
  std::string where() const {
    std::string path;
    int shown = 0;
    for (const Frame& f : frames_) {
      if (++shown > 12) {  // a deep path is told by its start
        path += "...";
        break;
      }
      if (f.array) {
        if (f.index >= 0) path += "[" + std::to_string(f.index) + "]";
      } else if (!f.key.empty()) {
        if (!path.empty()) path += ".";
        path += path_key(f.key);
      }
    }
    return path.empty() ? "body" : path;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<Frame> frames_;
  std::string error_;
};

}  // namespace

ServiceStatus parse_json_body(std::string_view text, json* out) {
  json parsed;
  BodySax sax(parsed);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const std::exception& e) {  // the SAX path reports through parse_error; this is a guard
    return {ServiceCode::kInvalidArgument, "body: not valid JSON: " + log_escape(e.what(), 200)};
  }
  if (!ok) {
    const std::string& error = sax.error();
    return {ServiceCode::kInvalidArgument, error.empty() ? std::string("body: not valid JSON") : error};
  }
  *out = std::move(parsed);
  return {};
}

std::string json_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string json_brief(const json& j, size_t max_bytes) {
  std::string text = json_text(j.is_string() && j.get_ref<const std::string&>().size() > max_bytes
                                   ? json(j.get_ref<const std::string&>().substr(0, max_bytes))
                                   : j);
  if (text.size() <= max_bytes) return text;
  // Cut on a character boundary, so the message stays valid UTF-8.
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

std::string valid_utf8(std::string_view bytes) {
  if (utf8_is_valid(bytes)) return std::string(bytes);
  std::string pending(bytes);
  return utf8_take_complete(pending, true);
}

}  // namespace kvserve
