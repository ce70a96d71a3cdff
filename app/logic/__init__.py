"""The window's plain-Python side: the application state and its events (psygnal), the request
policy and step gate, and every text and number the views show (wording, help, tour, Flow numbers and
layout, the model's words). No Qt and no torch: tested without a QApplication."""
