"""The demo: the Gradio chat UI on the sample knowledge base (`make run`).

The UI itself lives in guardrag/faces/ui.py, so `guardrag serve` can mount it too.
"""

from guardrag.faces.ui import main

if __name__ == "__main__":
    main()
