"""The engine process's side of the app: the session host that answers the window's requests with
the engine, the saver that writes session files beside it, the serve loop that reads requests off the
wire, and the torch thread settings. Plain Python, no Qt; this is the only room of app/ that may
import torch (the window reaches it only through the wire, or with ``--engine thread``)."""
