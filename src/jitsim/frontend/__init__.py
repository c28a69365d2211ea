"""Front ends: turning what users hold (SavedModels, GraphDefs exported from Python, Keras
files) into the graph TF's clustering passes would see."""
