# syntax=docker/dockerfile:1
#
# Evalplan image: the API (`evalplan serve`, the default command), the Celery
# workers (`evalplan worker --queues ...`) and migrations (`evalplan db upgrade`)
# all run from this one image.
#
#   CPU (default):  docker build -t evalplan:latest .
#   CUDA:           docker build --build-arg TORCH_VARIANT=cu126 -t evalplan:cuda .
#
# torch is installed first, from the PyTorch wheel index of TORCH_VARIANT, with
# the project's constraints (torch==2.13.0; that pin also matches the local
# versions 2.13.0+cpu / 2.13.0+cu126). The project install afterwards finds torch
# already satisfied and leaves it alone.

FROM python:3.11-slim

ARG TORCH_VARIANT=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/${TORCH_VARIANT}

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

# 1) torch from the PyTorch index of the chosen variant (own layer: it is big and rarely changes).
COPY constraints.txt /src/constraints.txt
RUN pip install --index-url "${TORCH_INDEX_URL}" -c constraints.txt "torch==2.13.0"

# 2) the project itself, under the same constraints.
COPY . /src
RUN pip install -c constraints.txt . \
 && python -c "import sys; from importlib.metadata import version; v = version('torch'); print('torch', v); sys.exit(0 if v.endswith('+' + sys.argv[1]) else 'torch ' + v + ' is not the ' + sys.argv[1] + ' build')" "${TORCH_VARIANT}"

# Working directory for embedded mode (SQLite file, see EVALPLAN_DATABASE_URL above);
# compose and Kubernetes set EVALPLAN_DATABASE_URL to PostgreSQL instead.
WORKDIR /var/lib/evalplan
USER 10001:10001

EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4); sys.exit(0 if r.status == 200 else 1)"]

CMD ["evalplan", "serve", "--host", "0.0.0.0", "--port", "8000"]
