"""Front ends for what users hold: SavedModels, ``.keras`` files, GraphDefs, programs and live
TensorFlow objects, turned into TF's own dumps of the clustering pass input (``capture``)."""
