# syntax=docker/dockerfile:1
#
# Evalplan images, two targets of this one project:
#
#   API (no torch):  docker build --target api -t evalplan-api:latest .
#                    `evalplan serve` (the default command) and `evalplan db upgrade`; the base install
#                    (`pip install .`): sessions, score-based coresets, every route. Jobs go to the workers
#                    (EVALPLAN_REDIS_URL); a job that needs torch run in-process here fails with 503.
#   worker (torch):  docker build --target worker -t evalplan-worker:latest .
#                    CUDA: docker build --target worker --build-arg TORCH_VARIANT=cu126 -t evalplan-worker:cuda .
#                    `pip install .[worker]`: embeddings (text coresets), RepCore, the IRT fit. Its default
#                    command is `evalplan worker --queues cpu,gpu`; it also serves the embedded mode alone
#                    (`docker run evalplan-worker evalplan serve ...`: in-process jobs need torch).
#
# In the worker, torch is installed first, from the PyTorch wheel index of TORCH_VARIANT, with the
# project's constraints (torch==2.13.0; that pin also matches the local versions 2.13.0+cpu /
# 2.13.0+cu126). The project install afterwards finds torch already satisfied and leaves it alone.

FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    EVALPLAN_DATA_DIR=/data \
    EVALPLAN_DATABASE_URL=sqlite:////var/lib/evalplan/evalplan.db

# Non-root user with a fixed numeric id (Kubernetes runAsNonRoot needs a number).
RUN groupadd --system --gid 10001 evalplan \
 && useradd --system --uid 10001 --gid evalplan --create-home --home-dir /home/evalplan \
        --shell /usr/sbin/nologin evalplan \
 && mkdir -p /var/lib/evalplan /data \
 && chown evalplan:evalplan /var/lib/evalplan /data

WORKDIR /src
COPY constraints.txt /src/constraints.txt
EXPOSE 8000

# ---------------------------------------------------------------------------------------------- worker
FROM base AS worker

ARG TORCH_VARIANT=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/${TORCH_VARIANT}

# 1) torch from the PyTorch index of the chosen variant (own layer: it is big and rarely changes).
RUN pip install --index-url "${TORCH_INDEX_URL}" -c constraints.txt "torch==2.13.0"

# 2) the project with the worker extra, under the same constraints.
COPY . /src
RUN pip install -c constraints.txt ".[worker]" \
 && python -c "import sys; from importlib.metadata import version; v = version('torch'); print('torch', v); sys.exit(0 if v.endswith('+' + sys.argv[1]) else 'torch ' + v + ' is not the ' + sys.argv[1] + ' build')" "${TORCH_VARIANT}"

WORKDIR /var/lib/evalplan
USER 10001:10001
CMD ["evalplan", "worker", "--queues", "cpu,gpu"]

# ---------------------------------------------------------------------------------------------- api
# Last, so that a plain `docker build .` builds the API image.
FROM base AS api

COPY . /src
RUN pip install -c constraints.txt . \
 && python -c "import importlib.util, sys; import evalplan.main, evalplan.client; sys.exit('torch must not be in the API image' if importlib.util.find_spec('torch') else 0)"

# Working directory for embedded mode (SQLite file, see EVALPLAN_DATABASE_URL above);
# compose and Kubernetes set EVALPLAN_DATABASE_URL to PostgreSQL instead.
WORKDIR /var/lib/evalplan
USER 10001:10001

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4); sys.exit(0 if r.status == 200 else 1)"]

CMD ["evalplan", "serve", "--host", "0.0.0.0", "--port", "8000"]
