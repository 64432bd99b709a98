// Asks a server's gRPC reflection service (v1alpha) to list its services, with the generic
// stub, so the tests need no reflection client library. Returns the status and the raw reply.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <string>

namespace kvserve::testing {

inline grpc::Status list_services_by_reflection(const std::shared_ptr<grpc::Channel>& channel, std::string* reply) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  void* tag;
  bool ok;
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  // ServerReflectionRequest { list_services: "" }: field 7, length-delimited, empty.
  const std::string request("\x3a\x00", 2);
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  call->WritesDone(reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  if (ok) {
    std::vector<grpc::Slice> slices;
    (void)in.Dump(&slices);
    for (const auto& s : slices) reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

}  // namespace kvserve::testing
