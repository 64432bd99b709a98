# kvserve: multi-stage image on Debian bookworm.
#   docker build -t kvserve .
#   docker run -p 50051:50051 -p 8000:8000 -v /path/to/models:/models:ro kvserve --model /models/model.gguf

FROM debian:bookworm AS build
# One list of build dependencies: the same script the tests use.
COPY scripts/deps.sh /src/scripts/deps.sh
RUN /src/scripts/deps.sh && rm -rf /var/lib/apt/lists/*
COPY . /src
# Portable build (no -march=native): the image may run on another CPU than the one it was built on;
# the hot kernels are built for every level (scalar, AVX2, AVX-512) and chosen at start-up.
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release -DKVSERVE_NATIVE=OFF \
 && cmake --build /build -j"$(nproc)" --target kvserve kvserve-cli kvserve-mkmodel

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgrpc++1.51 libprotobuf32 libdnnl2 libspdlog1.10 \
      libfmt9 libpcre2-8-0 libgomp1 libmicrohttpd12 libcpp-httplib0.11 libzmq5 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home kvserve
COPY --from=build /build/server/kvserve /build/clients/kvserve-cli /build/engine/kvserve-mkmodel /usr/local/bin/
COPY configs /etc/kvserve
USER kvserve
# OpenMP workers spin briefly between parallel regions, then sleep (see scripts/serve.sh).
ENV GOMP_SPINCOUNT=3000
# gRPC, the OpenAI-compatible HTTP API, and the Prometheus endpoint.
EXPOSE 50051 8000 9090
VOLUME /models
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s CMD ["kvserve-cli", "--addr", "127.0.0.1:50051", "--timeout", "2", "health"]
ENTRYPOINT ["kvserve", "--config", "/etc/kvserve/default.json", "--listen", "0.0.0.0:50051", \
            "--set", "server.metrics_listen=\"0.0.0.0:9090\"", "--set", "server.http_listen=\"0.0.0.0:8000\""]
CMD ["--model", "/models/model.gguf"]
