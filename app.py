"""The demo: the Gradio chat UI on the sample knowledge base (`make run`).

The UI itself lives in guardrag/faces/ui/, so `guardrag serve` can mount it too.
"""

from guardrag.faces import startup

startup.pause()  # before the UI's imports (Gradio's among them): see guardrag/faces/startup.py

from guardrag.faces.ui import main  # noqa: E402

if __name__ == "__main__":
    main()
