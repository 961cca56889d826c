"""ONNX models: export and int8 quantisation of checkpoints (``onnx_models.export``, needs the
``train`` extra), the manifest that describes an export (``onnx_models.manifest``), and the
packaged model specs (``onnx_models.sources``). The runtime imports only the last two."""
