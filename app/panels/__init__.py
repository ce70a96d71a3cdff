"""One module per panel. Panels draw numpy arrays from engine traces and never import torch."""
