// kvserve-cli chat: a conversation in the terminal over the OpenAI-compatible HTTP API (the
// model's chat template applies server-side): each line read is a user turn, the answer streams
// back as it is generated, and the history goes with every turn.
#pragma once

#include <string>

namespace kvserve {

struct ChatOptions {
  std::string http = "127.0.0.1:8000";  // the server's HTTP API, HOST:PORT
  std::string token;                    // bearer token, if the server wants one
  std::string system;                   // a system message first, if any
  int max_tokens = 512;
  double temperature = 0.7;
  bool quiet = false;                   // no prompts ("> ") and no banner: for pipes
};

// Returns the exit code: 0 at the end of input, 1 when the server refuses or cannot be reached.
int cli_chat(const ChatOptions& options);

}  // namespace kvserve
